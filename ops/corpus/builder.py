"""A document assembled piece by piece, recording where each ground-truth value lands.

Offsets are taken while the text is built, after any noise has been applied to the piece being
added, so `text[start:end] == value` holds by construction; noise only ever touches the pieces
that carry no value.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Noise = Callable[[str], str]


@dataclass(frozen=True)
class TruthSpan:
    text: str
    start: int
    end: int


@dataclass
class DocumentBuilder:
    labels: Sequence[str]
    noise: Noise = field(default=lambda text: text)
    parts: list[str] = field(default_factory=list)
    length: int = 0
    truth: dict[str, list[TruthSpan]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.truth = {label: [] for label in self.labels}

    def text(self, *pieces: str) -> DocumentBuilder:
        """Plain text (noise may alter it)."""
        for piece in pieces:
            self._append(self.noise(piece))
        return self

    def value(self, label: str, value: str) -> DocumentBuilder:
        """A ground-truth value of `label`, written verbatim; a repeat of a value is not a new one."""
        if label not in self.truth:
            raise KeyError(f"{label!r} is not one of {list(self.truth)}")
        if all(span.text != value for span in self.truth[label]):
            self.truth[label].append(TruthSpan(value, self.length, self.length + len(value)))
        self._append(value)
        return self

    def mention(self, value: str) -> DocumentBuilder:
        """Text that must survive intact (a distractor, a value repeated) but is no new value."""
        self._append(value)
        return self

    def pad_to(self, target: int, fillers: Sequence[str], rng: random.Random) -> DocumentBuilder:
        """Boilerplate sentences, in a seeded order, until the text is about `target` characters."""
        pool = list(fillers)
        rng.shuffle(pool)
        for sentence in pool:
            if self.length + len(sentence) > target:
                continue
            self.text(sentence)
        return self

    def build(self) -> tuple[str, dict[str, list[TruthSpan]]]:
        text = "".join(self.parts)
        for spans in self.truth.values():
            for span in spans:
                if text[span.start : span.end] != span.text:
                    raise RuntimeError(f"value {span.text!r} lost its place at {span.start}")
        return text, self.truth

    def _append(self, piece: str) -> None:
        self.parts.append(piece)
        self.length += len(piece)
