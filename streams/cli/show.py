"""One readable line (or a few) per record, for `seqstream tail` and the demo."""

from __future__ import annotations

import msgspec

from schemas.messages import AlertRecord, AuditRecord, DeadLetter, FieldRecord, ReviewDecision, ReviewRecord
from streams.flow.routing import outcome_of_topic
from streams.settings import TopicSettings

# By the kinds of `outcome_of_topic`.
_decoders = {
    "fields": msgspec.json.Decoder(FieldRecord),
    "review": msgspec.json.Decoder(ReviewRecord),
    "alert": msgspec.json.Decoder(AlertRecord),
    "dead_letter": msgspec.json.Decoder(DeadLetter),
    "audit": msgspec.json.Decoder(AuditRecord),
}
_decision = msgspec.json.Decoder(ReviewDecision)
# msgspec writes a tagged struct's tag first: the review desk's decisions share the audit topic.
DECISION_PREFIX = b'{"kind":"review_decision"'


def describe(topic: str, topics: TopicSettings, value: bytes) -> str:
    kind = outcome_of_topic(topics).get(topic)
    if kind is None:
        return value.decode("utf-8", "replace")
    try:
        record = _decision.decode(value) if value.startswith(DECISION_PREFIX) else _decoders[kind].decode(value)
    except msgspec.DecodeError as exc:
        return f"[unreadable {kind} record: {exc}]"
    if isinstance(record, ReviewDecision):
        reason = f" ({record.reason})" if record.reason else ""
        return f"DECIDED {record.doc_id}  {record.action} by {record.reviewer}{reason}  {_fields(record)}"
    if isinstance(record, AuditRecord):
        steps = sum(len(p.tokens) for p in record.prompts)
        return f"AUDIT   {record.doc_id}  {len(record.prompts)} prompts, {steps} decode steps, {record.retries} retries"
    if isinstance(record, FieldRecord):
        windows = f"  ({len(record.windows)} windows)" if len(record.windows) > 1 else ""
        if isinstance(record, ReviewRecord):
            reasons = ", ".join(sorted({r.code.value for r in record.reasons}))
            return f"REVIEW  {record.doc_id}  {_fields(record)}{windows}  reasons: {reasons}"
        by = f"  (reviewed by {record.reviewed.reviewer})" if record.reviewed else ""
        return f"FIELDS  {record.doc_id}  {_fields(record)}{windows}{by}"
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


def _fields(record: FieldRecord | ReviewDecision) -> str:
    if isinstance(record, FieldRecord) and record.task == "classify":
        return "classes=" + ",".join(record.classes)
    parts = [f"{label}={'|'.join(s.text for s in spans)}" for label, spans in record.fields.items() if spans]
    return "; ".join(parts) if parts else "(no values)"


def describe_audit(record: AuditRecord) -> str:
    """The whole decode trace of one record: one line per generated token, per prompt."""
    m = record.model
    lines = [
        f"audit trail of {record.doc_id} (trace {record.trace_id or '-'}): {m.name}, engine {m.engine}, "
        f"{m.dtype} on {m.device}{', DEMO MODEL' if m.demo else ''}; retries {record.retries}; "
        f"worker {record.processing.worker_id}, {record.processing.completed_at:%Y-%m-%d %H:%M:%S}",
    ]
    for prompt in record.prompts:
        lines.append(
            f"prompt {prompt.chunk} (window {prompt.window}): {', '.join(prompt.labels)}"
            f" ({'ended' if prompt.finished else 'hit the token limit'} after {len(prompt.tokens)} tokens)"
        )
        lines.append(f"  {'step':>4}  {'token':>6}  {'text':<12}  {'prob':>6}  {'margin':>6}  {'entropy':>7}  flags")
        for t in prompt.tokens:
            flags = "forced" if t.forced else "-"
            lines.append(
                f"  {t.step:>4}  {t.token_id:>6}  {t.text!r:<12}  {t.prob:>6.3f}  {t.margin:>6.3f}  "
                f"{t.entropy_nats:>7.3f}  {flags}"
            )
    return "\n".join(lines)
