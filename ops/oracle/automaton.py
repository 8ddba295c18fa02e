"""SeqGPT's answer format as a byte automaton: what `model/answers/parse.py` reads and `format_extraction` writes.

    answer := line ("\n" line)* EOS        one line per requested label, each label once
    line   := label ": " ("None" | value ("\t" value)*)
    value  := a non-empty run of the source's bytes, no tab or newline, starting on a character
              that is not blank and ending on a character boundary

Nondeterministic on purpose: "N" after ": " may start `None` or a value that starts with N; a label
may be a prefix of another. A state is the set of configurations still possible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model.grammar.source import CHECKED_TYPES, WordEdges
from model.grammar.token_bytes import VALUE_BREAKS
from model.values.field_types import FieldType, complete_value, viable_prefix

NONE_WORD = b"None"
LABEL_SEPARATOR = b": "
TAB, NEWLINE = 9, 10
_BLANKS = frozenset(b" \r")
_IDEOGRAPHIC_SPACE = "\u3000".encode()


@dataclass(frozen=True)
class Line:
    """Inside a line's `label: ` head; `answered` is a bitmask over the chunk's labels."""

    answered: int
    prefix: bytes


@dataclass(frozen=True)
class ValueStart:
    answered: int
    label: int
    first: bool  # the line's first value: `None` is still possible


@dataclass(frozen=True)
class Value:
    answered: int
    label: int
    ends: frozenset[int]  # source byte positions where the value so far may end
    text: bytes


@dataclass(frozen=True)
class NoneWord:
    answered: int
    consumed: int


@dataclass(frozen=True)
class LineEnd:
    answered: int


Config = Line | ValueStart | Value | NoneWord | LineEnd


class Source:
    """A document's text as bytes, with where values may start (indexed by first byte)."""

    def __init__(self, text: str) -> None:
        self.data = text.encode()
        self._completions: dict[bytes, list[str]] = {}
        self.starts = [p for p in range(len(self.data)) if self._may_start(p)]
        self.starts_by_byte: dict[int, list[int]] = {}
        for p in self.starts:
            self.starts_by_byte.setdefault(self.data[p], []).append(p)
        # Each character's byte offset, then the end: word-edge tables and whole values count characters.
        self.char_at = [0]
        for ch in self.data.decode():
            self.char_at.append(self.char_at[-1] + len(ch.encode()))
        self._complete: dict[str, frozenset[int]] = {}

    def complete_ends(self, kind: FieldType) -> frozenset[int]:
        """Byte positions where the text, from some start, reads as a whole value of `kind` with every
        prefix viable on the way: where a value of that checked type may end."""
        if kind not in self._complete:
            text, at = self.data.decode(), self.char_at
            ends = set()
            for s in range(len(text)):
                if not self._may_start(at[s]):
                    continue
                for e in range(s + 1, len(text) + 1):
                    if not viable_prefix(kind, text[s:e]):
                        break
                    if complete_value(kind, text[s:e]):
                        ends.add(at[e])
            self._complete[kind] = frozenset(ends)
        return self._complete[kind]

    def _may_start(self, p: int) -> bool:
        b = self.data[p]
        return (
            self.is_boundary(p)
            and b not in VALUE_BREAKS
            and b not in _BLANKS
            and not self.data.startswith(_IDEOGRAPHIC_SPACE, p)
        )

    def characters_starting(self, cut: bytes) -> list[str]:
        """The source's characters whose encoding starts with `cut` (the bytes of a cut character)."""
        if cut not in self._completions:
            self._completions[cut] = sorted(ch for ch in set(self.data.decode()) if ch.encode().startswith(cut))
        return self._completions[cut]

    def is_boundary(self, p: int) -> bool:
        return p == len(self.data) or self.data[p] & 0xC0 != 0x80


class Grammar:
    """The automaton of one prompt: its chunk's labels over one document's source. A name-like label's
    values start and end only on the word edges `edges` gives its class (in characters)."""

    def __init__(
        self,
        source: Source,
        labels: tuple[str, ...],
        types: Mapping[str, FieldType] | None = None,
        edges: WordEdges | None = None,
    ) -> None:
        self.source = source
        self.heads = [label.encode() + LABEL_SEPARATOR for label in labels]
        self.complete = (1 << len(labels)) - 1
        types = types or {}
        self.types: list[FieldType | None] = [
            types.get(label) if types.get(label) not in (None, "text") else None for label in labels
        ]
        classes = edges.classes if edges is not None else {}
        self.edge_class: list[str | None] = [classes.get(label) for label in labels]
        # Per label: the byte positions its values may start and end at, None where any will do.
        self.edge_starts: list[frozenset[int] | None] = []
        self.edge_ends: list[frozenset[int] | None] = []
        at = source.char_at
        for name in self.edge_class:
            if name is None or edges is None:
                self.edge_starts.append(None)
                self.edge_ends.append(None)
                continue
            starts, ends = edges.tables[name]
            self.edge_starts.append(frozenset(at[i] for i, ok in enumerate(starts) if ok))
            self.edge_ends.append(frozenset(at[i] for i, ok in enumerate(ends) if ok))
        # A checked type's values end only where a whole value of the type does (they start anywhere).
        for i, kind in enumerate(self.types):
            if kind in CHECKED_TYPES:
                self.edge_class[i] = kind
                self.edge_ends[i] = source.complete_ends(kind)

    def can_end(self, c: Value) -> bool:
        """The value may end here: on a character boundary, and a word edge or a whole value's end
        where its label asks."""
        ends = self.edge_ends[c.label]
        return any(self.source.is_boundary(e) and (ends is None or e in ends) for e in c.ends)

    def starts(self, label: int, first: int) -> list[int]:
        """Where a value of `label` whose first byte is `first` may start."""
        found = self.source.starts_by_byte.get(first, [])
        allowed = self.edge_starts[label]
        return found if allowed is None else [p for p in found if p in allowed]

    def initial(self) -> frozenset[Config]:
        return frozenset({Line(0, b"")})

    def accepts_end(self, configs: frozenset[Config]) -> bool:
        """End-of-sequence: every label answered and its line complete."""
        for c in configs:
            if isinstance(c, LineEnd) and c.answered == self.complete:
                return True
            if isinstance(c, Value) and c.answered == self.complete and self.can_end(c):
                return True
        return False

    def advance(self, configs: frozenset[Config], data: bytes) -> frozenset[Config]:
        for b in data:
            configs = frozenset(n for c in configs for n in self.step(c, b))
            if not configs:
                break
        return configs

    def viable(self, label: int, text: bytes) -> bool:
        kind = self.types[label]
        if kind is None:
            return True
        whole, cut = _cut_character(text)
        if not cut:
            return viable_prefix(kind, whole.decode())
        # A cut character is judged by what it can still become, a character of the source: judging it
        # as nothing let a phone value start on half of 招 and end the row with no legal token.
        return any(viable_prefix(kind, whole.decode() + ch) for ch in self.source.characters_starting(cut))

    def step(self, c: Config, b: int) -> list[Config]:
        if isinstance(c, Line):
            prefix = c.prefix + bytes([b])
            found: set[Config] = set()
            for i, head in enumerate(self.heads):
                if c.answered >> i & 1 or not head.startswith(prefix):
                    continue
                found.add(ValueStart(c.answered | 1 << i, i, True) if head == prefix else Line(c.answered, prefix))
            return list(found)
        if isinstance(c, ValueStart):
            found = []
            starts = self.starts(c.label, b)
            if starts and self.viable(c.label, bytes([b])):
                found.append(Value(c.answered, c.label, frozenset(p + 1 for p in starts), bytes([b])))
            if c.first and b == NONE_WORD[0]:
                found.append(NoneWord(c.answered, 1))
            return found
        if isinstance(c, Value):
            if b in VALUE_BREAKS:
                if not self.can_end(c):
                    return []
                if b == TAB:
                    return [ValueStart(c.answered, c.label, False)]
                return [Line(c.answered, b"")] if c.answered != self.complete else []
            data = self.source.data
            ends = frozenset(e + 1 for e in c.ends if e < len(data) and data[e] == b)
            text = c.text + bytes([b])
            return [Value(c.answered, c.label, ends, text)] if ends and self.viable(c.label, text) else []
        if isinstance(c, NoneWord):
            if b != NONE_WORD[c.consumed]:
                return []
            return [LineEnd(c.answered) if c.consumed + 1 == len(NONE_WORD) else NoneWord(c.answered, c.consumed + 1)]
        if b == NEWLINE and c.answered != self.complete:
            return [Line(c.answered, b"")]
        return []

    def literal_bytes(self, c: Config) -> list[int]:
        """The bytes that may follow `c` other than a value's own bytes (those come from the source)."""
        if isinstance(c, Line):
            n = len(c.prefix)
            return sorted(
                {
                    h[n]
                    for i, h in enumerate(self.heads)
                    if not c.answered >> i & 1 and len(h) > n and h.startswith(c.prefix)
                }
            )
        if isinstance(c, ValueStart):
            return [NONE_WORD[0]] if c.first else []
        if isinstance(c, Value):
            return [TAB, NEWLINE] if self.can_end(c) else []
        if isinstance(c, NoneWord):
            return [NONE_WORD[c.consumed]]
        return [NEWLINE]


def _cut_character(text: bytes) -> tuple[bytes, bytes]:
    """`text` split before a trailing, incomplete UTF-8 character (empty when there is none)."""
    lead = len(text) - 1
    while lead >= 0 and text[lead] & 0xC0 == 0x80:
        lead -= 1
    if lead < 0:
        return b"", text
    first = text[lead]
    size = 1 if first < 0x80 else 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    return (text, b"") if len(text) - lead >= size else (text[:lead], text[lead:])
