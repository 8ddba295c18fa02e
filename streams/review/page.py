"""What the desk page shows of a review record: pure, so the templates only lay it out."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.messages import Candidate, ReviewCode, Span
from streams.review.queue import Waiting

# The review codes in a reviewer's words.
REASONS = {
    ReviewCode.LOW_CONFIDENCE: "the model was unsure of a value",
    ReviewCode.NOT_IN_SOURCE: "a value was not found in the text",
    ReviewCode.TRUNCATED: "the answer was cut off",
    ReviewCode.ENTROPY_ALARM: "the model's choices were spread thin (entropy alarm)",
    ReviewCode.UNKNOWN_LABEL: "the model answered a label nobody asked for",
    ReviewCode.DUPLICATE_LABEL: "the model answered a label twice",
    ReviewCode.MALFORMED_OUTPUT: "the model's answer could not be read",
    ReviewCode.INCOMPLETE_OUTPUT: "some labels got no answer",
    ReviewCode.TYPE_MISMATCH: "a value is not of its label's type",
    ReviewCode.VALUE_BOUNDARY: "a value starts or ends inside a word",
    ReviewCode.UNCLAIMED_VALUE: "a value of the label's type in the text was not taken",
    ReviewCode.EMPTY_RECORD: "no label got a value",
    ReviewCode.LEXICON_BACKOFF: "the model said None; a value was picked among the analyser's candidates",
}
# One colour per label, by its place in the record's labels (background behind the highlighted text).
PALETTE = ("#ffd8a8", "#b2f2bb", "#a5d8ff", "#eebefa", "#ffec99", "#99e9f2", "#ffc9c9", "#d0bfff")


@dataclass
class Segment:
    text: str
    start: int
    label: str | None = None
    colour: str = ""


@dataclass
class LabelView:
    index: int
    label: str
    colour: str
    values: list[Span]
    candidates: list[Candidate] = field(default_factory=list)


@dataclass
class DeskView:
    waiting: Waiting
    segments: list[Segment]
    labels: list[LabelView]
    reasons: list[str]
    newer_offset: int | None
    decided_before: tuple[str, str] | None


def segments(text: str, fields: dict[str, list[Span]], colours: dict[str, str]) -> list[Segment]:
    """The text cut at every value's edges, each piece with the label whose value it is (the first,
    where two overlap): every character once, in order, with its offset."""
    spans = sorted((s.start, s.end, label) for label, values in fields.items() for s in values)
    out: list[Segment] = []
    at = 0
    for start, end, label in spans:
        if start < at or end > len(text):
            continue  # overlaps one already shown
        if start > at:
            out.append(Segment(text[at:start], at))
        out.append(Segment(text[start:end], start, label, colours.get(label, "")))
        at = end
    if at < len(text):
        out.append(Segment(text[at:], at))
    return out


def _about(label: str | None, value: str | None) -> str:
    if label is None:
        return ""
    return f" ({label}: {value})" if value else f" ({label})"


def desk_view(waiting: Waiting, newer: Waiting | None, decided: dict[str, tuple[str, str]]) -> DeskView:
    record = waiting.record
    if record is None:
        return DeskView(waiting, [], [], [waiting.error or "unreadable"], None, None)
    colours = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(record.labels)}
    labels = [
        LabelView(i, label, colours[label], record.fields.get(label, []), record.candidates.get(label, []))
        for i, label in enumerate(record.labels)
    ]
    reasons = [
        REASONS.get(r.code, r.code.value)
        + (f" ({r.label}" + (f": {r.value}" if r.value else "") + ")" if r.label else "")
        for r in record.reasons
    ]
    return DeskView(
        waiting=waiting,
        segments=segments(record.text or "", record.fields, colours),
        labels=labels,
        reasons=reasons,
        newer_offset=newer.at.offset if newer else None,
        decided_before=decided.get(record.doc_id),
    )
