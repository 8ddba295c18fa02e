"""`seqstream-ops corpus from-reviews`: what reviewers accepted or corrected on the review desk, as a
labelled corpus in the format the eval and the fine-tune read (FILE.jsonl and FILE.truth.jsonl).

A decision on the audit topic holds the values a person vouched for; the review record it decided
(same topic, partition and offset) holds the text. Each labelled document is the record's text with,
per label it asked for, the decided spans (none: the label has no value in the text). Rejections
teach nothing about values and are left out. A document decided more than once keeps its latest
decision.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ops.corpus.builder import TruthSpan
from ops.corpus.generate import GeneratedDocument, truth_path
from schemas.field_sets import FIELD_SETS
from schemas.messages import ReviewDecision, ReviewRecord
from streams.cli.show import DECISION_PREFIX
from streams.kafka.clients import consume
from streams.settings import Settings

Where = tuple[str, int, int]


def decisions(settings: Settings, idle_timeout: float) -> dict[Where, ReviewDecision]:
    """Accepted and corrected decisions by the review record they decided; the latest per document."""
    latest: dict[str, ReviewDecision] = {}
    for message in consume(settings, [settings.topics.audit], idle_timeout=idle_timeout):
        if message.value().startswith(DECISION_PREFIX):
            decision = msgspec.json.decode(message.value(), type=ReviewDecision)
            kept = latest.get(decision.doc_id)
            if kept is None or kept.decided_at <= decision.decided_at:
                latest[decision.doc_id] = decision
    # Rejections drop out only now: a later rejection of a document withdraws its earlier acceptance.
    return {(d.review_topic, d.review_partition, d.review_offset): d for d in latest.values() if d.action != "rejected"}


def reviewed_documents(settings: Settings, idle_timeout: float = 5.0) -> Iterator[GeneratedDocument]:
    decided = decisions(settings, idle_timeout)
    if not decided:
        return
    for message in consume(settings, [settings.topics.review], idle_timeout=idle_timeout):
        decision = decided.get((message.topic(), message.partition(), message.offset()))
        if decision is None:
            continue
        record = msgspec.json.decode(message.value(), type=ReviewRecord)
        if record.text is None:
            continue  # written before review records carried their text: nothing to label
        kind = next((name for name, labels in FIELD_SETS.items() if list(labels) == record.labels), "custom")
        truth = {
            label: [TruthSpan(s.text, s.start, s.end) for s in decision.fields.get(label, [])]
            for label in record.labels
        }
        yield GeneratedDocument(doc_id=record.doc_id, kind=kind, text=record.text, truth=truth)


def write_reviewed(path: Path, documents: Iterator[GeneratedDocument]) -> int:
    """FILE.jsonl (raw documents: a field set's name, else the labels) and FILE.truth.jsonl."""
    count = 0
    with path.open("w", encoding="utf-8") as raw, truth_path(path).open("w", encoding="utf-8") as truth:
        for doc in documents:
            asked = {"field_set": doc.kind} if doc.kind in FIELD_SETS else {"labels": list(doc.truth)}
            raw.write(json.dumps({"doc_id": doc.doc_id, "text": doc.text, **asked}, ensure_ascii=False) + "\n")
            truth.write(json.dumps(doc.truth_line(), ensure_ascii=False) + "\n")
            count += 1
    return count
