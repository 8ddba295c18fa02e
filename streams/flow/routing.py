"""Where each result goes. Pure: these functions decide and encode; only the agent sends.

- validated extraction       -> fields
- anything a person must see -> review (with machine-readable reasons)
- entropy alarm              -> alerts, and the record itself to review
- unprocessable input        -> dead letters (original bytes untouched)
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

import msgspec

from model import Extraction
from schemas.decode import DocumentError
from schemas.messages import (
    AlertRecord,
    AuditRecord,
    Document,
    ErrorCode,
    FieldRecord,
    ModelInfo,
    Processing,
    PromptTrace,
    ReviewRecord,
    TokenTrace,
)
from streams.flow.batching import DeadlineExceeded
from streams.flow.outgoing import Outgoing, dead_letter
from streams.kafka.inbound import Inbound
from streams.settings import TopicSettings

_encoder = msgspec.json.Encoder()


def outcome_of_topic(topics: TopicSettings) -> dict[str, str]:
    """Output topic name -> its kind of record: the label the metrics count it under, and what
    `seqstream tail` decodes it as."""
    return {
        topics.fields: "fields",
        topics.review: "review",
        topics.alerts: "alert",
        topics.dead_letter: "dead_letter",
        topics.audit: "audit",
    }


def route_extraction(
    doc: Document,
    extraction: Extraction,
    model: ModelInfo,
    processing: Processing,
    topics: TopicSettings,
    raw_timestamp: datetime | None = None,
) -> list[Outgoing]:
    common = dict(
        doc_id=doc.doc_id,
        task=doc.task,
        labels=list(doc.labels),
        fields=extraction.fields,
        classes=extraction.classes,
        model=model,
        source=doc.source,
        submitted_at=doc.submitted_at,
        trace_id=doc.trace_id,
        metadata=doc.metadata,
        processing=processing,
        windows=extraction.windows,
        alternatives=extraction.alternatives,
    )
    key = doc.doc_id.encode()
    if not extraction.needs_review:
        return [Outgoing(topics.fields, key, _encoder.encode(FieldRecord(**common)), doc.submitted_at, raw_timestamp)]
    review = ReviewRecord(**common, reasons=extraction.reasons, candidates=extraction.candidates, text=doc.text)
    out = [Outgoing(topics.review, key, _encoder.encode(review), doc.submitted_at, raw_timestamp)]
    if extraction.alarms:
        worst = max(a.entropy_nats for a in extraction.alarms)
        alert = AlertRecord(
            alert_id=f"{doc.doc_id}/entropy",
            kind="entropy",
            severity="warning",
            doc_id=doc.doc_id,
            trace_id=doc.trace_id,
            message=f"{extraction.alarmed_steps} decode steps above {model.decode.entropy_threshold} nats "
            f"(worst {worst:.3f})",
            alarmed_steps=extraction.alarmed_steps,
            alarms=extraction.alarms,
            worker_id=processing.worker_id,
            raised_at=processing.completed_at,
        )
        out.append(Outgoing(topics.alerts, key, _encoder.encode(alert)))
    return out


def audit_trail(
    doc: Document, extraction: Extraction, model: ModelInfo, processing: Processing, topics: TopicSettings
) -> Outgoing:
    """Every decode step behind the document's record, for the audit topic."""
    prompts = []
    for chunk, trace in enumerate(extraction.traces):
        g = trace.generation
        tokens = [
            TokenTrace(
                step=step,
                token_id=token_id,
                text=trace.token_texts[step],
                prob=g.probs[step],
                margin=g.probs[step] - _runner_up(g.top_ids[step], g.top_probs[step], token_id),
                entropy_nats=g.entropies[step],
                forced=bool(g.forced and g.forced[step]),
            )
            for step, token_id in enumerate(g.token_ids)
        ]
        prompts.append(
            PromptTrace(
                chunk=chunk,
                labels=list(trace.labels),
                finished=g.finished,
                tokens=tokens,
                window=extraction.trace_windows[chunk],
            )
        )
    record = AuditRecord(
        doc_id=doc.doc_id,
        trace_id=doc.trace_id,
        model=model,
        retries=extraction.retries,
        prompts=prompts,
        processing=processing,
    )
    return Outgoing(topics.audit, doc.doc_id.encode(), _encoder.encode(record))


def _runner_up(top_ids: list[int], top_probs: list[float], chosen: int) -> float:
    return next((p for token_id, p in zip(top_ids, top_probs, strict=True) if token_id != chosen), 0.0)


def route_rejection(inbound: Inbound, error: DocumentError, topics: TopicSettings, worker_id: str) -> Outgoing:
    return dead_letter(inbound, error.code, error.message, error.doc_id, topics, worker_id)


def route_failure(
    inbound: Inbound, doc: Document, error: BaseException, topics: TopicSettings, worker_id: str, now: datetime
) -> list[Outgoing]:
    """The engine raised, or ran past the deadline, on this document alone: a dead letter, and a
    pipeline alarm for operations."""
    if isinstance(error, DeadlineExceeded):
        code, message = ErrorCode.DEADLINE_EXCEEDED, str(error)
    else:
        code, message = ErrorCode.PROCESSING_FAILED, f"the engine raised {type(error).__name__}: {error}"
    alert = AlertRecord(
        alert_id=f"{doc.doc_id}/{code.value}",
        kind="pipeline",
        severity="critical",
        doc_id=doc.doc_id,
        trace_id=doc.trace_id,
        message=message,
        worker_id=worker_id,
        raised_at=now,
    )
    record = dead_letter(inbound, code, message, doc.doc_id, topics, worker_id)
    return [
        dataclasses.replace(record, submitted_at=doc.submitted_at),
        Outgoing(topics.alerts, doc.doc_id.encode(), _encoder.encode(alert)),
    ]
