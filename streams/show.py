"""One readable line (or a few) per record, for `seqstream tail` and the demo."""

from __future__ import annotations

import msgspec

from schemas.messages import AlertRecord, DeadLetter, FieldRecord, ReviewRecord
from streams.settings import TopicSettings

_decoders = {
    "fields": msgspec.json.Decoder(FieldRecord),
    "review": msgspec.json.Decoder(ReviewRecord),
    "alerts": msgspec.json.Decoder(AlertRecord),
    "dead_letter": msgspec.json.Decoder(DeadLetter),
}


def describe(topic: str, topics: TopicSettings, value: bytes) -> str:
    kind = {
        topics.fields: "fields",
        topics.review: "review",
        topics.alerts: "alerts",
        topics.dead_letter: "dead_letter",
    }.get(topic)
    if kind is None:
        return value.decode("utf-8", "replace")
    try:
        record = _decoders[kind].decode(value)
    except msgspec.DecodeError as exc:
        return f"[unreadable {kind} record: {exc}]"
    if isinstance(record, ReviewRecord):
        reasons = ", ".join(sorted({r.code.value for r in record.reasons}))
        return f"REVIEW  {record.doc_id}  {_fields(record)}  reasons: {reasons}"
    if isinstance(record, FieldRecord):
        return f"FIELDS  {record.doc_id}  {_fields(record)}"
    if isinstance(record, AlertRecord):
        line = f"ALERT   {record.doc_id}  {record.kind}/{record.severity}: {record.message}"
        if record.alarms:
            a = record.alarms[0]
            alternatives = " ".join(f"{c.text!r}={c.prob:.3f}" for c in a.alternatives)
            line += (
                f"\n        first alarm: prompt {a.chunk} step {a.step}, {a.entropy_nats:.2f} nats, "
                f"chose {a.chosen.text!r} ({a.chosen.prob:.3f}); alternatives {alternatives}"
            )
        return line
    where = f"{record.source_topic}[{record.partition}]@{record.offset}"
    return f"DEAD    {record.doc_id or '-'}  {record.error_code.value}: {record.message}  ({where})"


def _fields(record: FieldRecord) -> str:
    if record.task == "classify":
        return "classes=" + ",".join(record.classes)
    parts = [f"{label}={'|'.join(s.text for s in spans)}" for label, spans in record.fields.items() if spans]
    return "; ".join(parts) if parts else "(no values)"
