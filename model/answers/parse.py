"""Reading SeqGPT's answer: one `label: value` line per label, `None` for no value.

Separators between several values of one label are not documented by the authors; we have seen or
been told of tab, `，`, `, ` and a plain space. A space or a comma may also sit *inside* a value
("Acme Holdings, Inc."), so the weaker separators split a value only when the unsplit text is not
something we accept (a substring of the source, or a known label when classifying).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from schemas.messages import ReviewCode

NO_VALUE = "None"
# Strongest first: a value is split on the first of these that it contains, and only if needed.
VALUE_SEPARATORS = ("\t", "，", ", ", ",", " ")
LABEL_SEPARATORS = (":", "：")


@dataclass(frozen=True)
class Piece:
    """A value as the model wrote it, with its character range in the generated text."""

    text: str
    start: int
    end: int


@dataclass
class ParsedAnswer:
    values: dict[str, list[Piece]] = field(default_factory=dict)
    # Per answered label, the character where its answer begins (a value's first or `None`'s `N`;
    # the line's end when it is empty): the token there decides whether the label has a value.
    starts: dict[str, int] = field(default_factory=dict)
    # (why, the label concerned if any, the offending text)
    problems: list[tuple[ReviewCode, str | None, str]] = field(default_factory=list)


def parse_extraction(output: str, labels: Sequence[str], accept: Callable[[str], bool]) -> ParsedAnswer:
    answer = ParsedAnswer()
    wanted = set(labels)
    offset = 0
    for line in output.split("\n"):
        line_start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        cut = _label_cut(line)
        if cut is None:
            answer.problems.append((ReviewCode.MALFORMED_OUTPUT, None, line))
            continue
        label = line[:cut].strip()
        if label not in wanted:
            answer.problems.append((ReviewCode.UNKNOWN_LABEL, label, line))
            continue
        if label in answer.values:
            answer.problems.append((ReviewCode.DUPLICATE_LABEL, label, line))
            continue
        value_start = line_start + cut + 1
        value = line[cut + 1 :]
        answer.starts[label] = value_start + len(value) - len(value.lstrip())
        if value.strip() == NO_VALUE:
            answer.values[label] = []
        else:
            answer.values[label] = _dedupe(split_values(value, value_start, accept))
    return answer


@functools.lru_cache(maxsize=4096)
def read_extraction(output: str, labels: tuple[str, ...], text: str) -> ParsedAnswer:
    """`parse_extraction` of an answer to a document, values accepted as they occur in its text;
    memoised, as the validation loop and the interpretation read the same answers (callers must
    not change what it returns)."""
    return parse_extraction(output, labels, text.__contains__)


def format_extraction(labels: Sequence[str], values: Mapping[str, Sequence[str]]) -> str:
    """The answer `parse_extraction` reads back as `values`: what a trained model should write."""
    lines = []
    for label in labels:
        found = values.get(label) or []
        lines.append(f"{label}: {VALUE_SEPARATORS[0].join(found) if found else NO_VALUE}")
    return "\n".join(lines)


def parse_classification(output: str, labels: Sequence[str]) -> ParsedAnswer:
    """The answer to a `分类` prompt is the chosen label(s), on one line."""
    answer = ParsedAnswer()
    wanted = set(labels)
    first_line = output.split("\n", 1)[0]
    chosen = []
    for piece in _dedupe(split_values(first_line, 0, wanted.__contains__)):
        if piece.text in wanted:
            chosen.append(piece)
        else:
            answer.problems.append((ReviewCode.UNKNOWN_LABEL, piece.text, first_line))
    answer.values["classes"] = chosen
    return answer


def split_values(value: str, start: int, accept: Callable[[str], bool], level: int = 0) -> list[Piece]:
    stripped = value.strip()
    if not stripped:
        return []
    start += len(value) - len(value.lstrip())
    if accept(stripped) or level == len(VALUE_SEPARATORS):
        return [Piece(stripped, start, start + len(stripped))]
    separator = VALUE_SEPARATORS[level]
    if separator not in stripped:
        return split_values(stripped, start, accept, level + 1)
    pieces: list[Piece] = []
    position = start
    for part in stripped.split(separator):
        pieces.extend(split_values(part, position, accept, level + 1))
        position += len(part) + len(separator)
    return pieces


def _label_cut(line: str) -> int | None:
    cuts = [i for i in (line.find(s) for s in LABEL_SEPARATORS) if i > 0]
    return min(cuts) if cuts else None


def _dedupe(pieces: list[Piece]) -> list[Piece]:
    seen: set[str] = set()
    unique = []
    for piece in pieces:
        if piece.text not in seen:
            seen.add(piece.text)
            unique.append(piece)
    return unique
