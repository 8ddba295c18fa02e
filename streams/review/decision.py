"""What a reviewer's choices on the desk become: pure functions from a review record and a form to
the fields record sent on and the decision kept on the audit topic.

A value a reviewer sets is a span of the document, as every value the model gives: the form names
offsets, and the text between them is read from the document here, never taken from the browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import msgspec

from schemas.messages import FieldRecord, ReviewDecision, ReviewMark, ReviewRecord, Span

# A value set by a person: as sure as the record gets, and no model margin behind it.
REVIEWED_CONFIDENCE = 1.0
_FIELD_RECORD_FIELDS = FieldRecord.__struct_fields__


class DecisionError(ValueError):
    """The form asks for something the record cannot hold (a label it lacks, a span off its text)."""


@dataclass(frozen=True)
class Position:
    """Where a review record was read: the decision commits the offset after it."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Choice:
    """A reviewer's decision as the form sent it: `spans` holds each label the reviewer set (an empty
    list: the label has no value in the text); labels not in it keep the record's values."""

    reviewer: str
    action: Literal["accept", "reject"]
    spans: dict[str, list[tuple[int, int]]]
    reason: str = ""


def reviewed_spans(record: ReviewRecord, spans: dict[str, list[tuple[int, int]]]) -> dict[str, list[Span]]:
    """The record's fields with the reviewer's spans in place of its own, every one checked to be a
    non-blank span of the text, under a label the record asked for."""
    text = record.text
    fields = {label: list(record.fields.get(label, [])) for label in record.labels}
    if text is None and any(spans.values()):
        # Written before review records carried their text: its values can be kept or cleared, not set.
        raise DecisionError(f"review record {record.doc_id!r} carries no text: a value cannot be set on it")
    text = text or ""
    for label, offsets in spans.items():
        if label not in fields:
            raise DecisionError(f"{label!r} is not one of the record's labels ({', '.join(record.labels)})")
        chosen = []
        for start, end in offsets:
            if not 0 <= start < end <= len(text):
                raise DecisionError(f"{label}: [{start}, {end}) is not a span of the {len(text)}-character text")
            if not text[start:end].strip():
                raise DecisionError(f"{label}: [{start}, {end}) is only whitespace")
            chosen.append(Span(text=text[start:end], start=start, end=end, confidence=REVIEWED_CONFIDENCE, margin=1.0))
        fields[label] = chosen
    return fields


def changed_labels(record: ReviewRecord, fields: dict[str, list[Span]]) -> list[str]:
    def offsets(spans: list[Span]) -> list[tuple[int, int]]:
        return [(s.start, s.end) for s in spans]

    return [label for label in record.labels if offsets(fields[label]) != offsets(record.fields.get(label, []))]


def decide(
    record: ReviewRecord, at: Position, choice: Choice, now: datetime
) -> tuple[FieldRecord | None, ReviewDecision]:
    """The fields record to send on (None for a rejection) and the decision for the audit topic."""
    where = dict(review_topic=at.topic, review_partition=at.partition, review_offset=at.offset)
    if not choice.reviewer:
        raise DecisionError("no reviewer: sign in first")
    if choice.action == "reject":
        if not choice.reason.strip():
            raise DecisionError("a rejection needs a reason")
        decision = ReviewDecision(
            doc_id=record.doc_id, reviewer=choice.reviewer, decided_at=now, action="rejected",
            reason=choice.reason.strip(), **where,
        )  # fmt: skip
        return None, decision
    fields = reviewed_spans(record, choice.spans)
    changed = changed_labels(record, fields)
    action = "corrected" if changed else "accepted"
    mark = ReviewMark(reviewer=choice.reviewer, decided_at=now, action=action, **where)
    kept = {name: getattr(record, name) for name in _FIELD_RECORD_FIELDS if name not in ("fields", "reviewed")}
    out = FieldRecord(**kept, fields=fields, reviewed=mark)
    decision = ReviewDecision(
        doc_id=record.doc_id, reviewer=choice.reviewer, decided_at=now, action=action,
        fields=fields, changed=changed, **where,
    )  # fmt: skip
    return out, decision


def decode_review(value: bytes) -> ReviewRecord:
    return msgspec.json.decode(value, type=ReviewRecord)
