"""One micro-batch, from raw messages to the messages to write: decode, extract, route.

`process_batch` runs on the worker's model thread, never on the event loop, and never raises for
a document's sake: every inbound message yields at least one outgoing message. It writes no
metrics: it returns what it measured, and the batch driver (streams/flow/driver.py) reports it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec

from model import BatchResult, Engine, Extraction, PreparingEngine, sum_timings
from schemas.decode import DocumentError, decode_document
from schemas.messages import Document, ErrorCode, Processing, Timings
from streams.flow.batching import Deadline, Failed, run_isolated
from streams.flow.routing import (
    Outgoing,
    audit_trail,
    dead_letter,
    route_extraction,
    route_failure,
    route_rejection,
)
from streams.kafka.inbound import Inbound
from streams.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class BatchMeasures:
    """What one batch cost and produced, for the driver's metrics: the pipeline itself writes none."""

    documents: int
    # Per decoded document, seconds from its fetch to the start of the batch.
    queue_s: list[float] = field(default_factory=list)
    # The model stages of every engine call on the batch, summed; None when no document reached the engine.
    model_timings: Timings | None = None
    generated_tokens: int = 0
    retries: int = 0
    engine_failures: int = 0
    # Routing and encoding; None when no document reached the engine.
    serialise_s: float | None = None


@dataclass
class Taken:
    """A batch decoded and, where the engine can, prepared (prompts, grammars): what `finish` runs.

    `take` is host work only, so a driver may take batch t+1 on another thread while batch t runs."""

    started: float
    documents: int
    rejected: list[Outgoing]
    accepted: list[tuple[Inbound, Document, float]]
    # The engine's prepared batch; None where the engine does not prepare, or its prepare raised
    # (then `finish` runs the plain extract, whose bisection finds the culprit as before).
    prepared: object | None = None


@dataclass
class ProcessedBatch:
    outgoing: list[Outgoing]
    measured: BatchMeasures


class Pipeline:
    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.worker_id = settings.worker.worker_id
        self.deadline = Deadline(settings.batch.deadline_s)

    def process_batch(self, batch: Sequence[Inbound]) -> ProcessedBatch:
        return self.finish(self.take(batch))

    def take(self, batch: Sequence[Inbound]) -> Taken:
        """Decode the batch's messages and prepare its documents for the engine: no model work."""
        started = time.monotonic()
        out: list[Outgoing] = []
        accepted: list[tuple[Inbound, Document, float]] = []
        for inbound in batch:
            try:
                limits = self.settings.batch
                doc = decode_document(inbound.value, limits.max_document_bytes, limits.max_document_chars)
            except DocumentError as error:
                log.info(
                    "dead letter %s at %s[%d]@%d", error.code.value, inbound.topic, inbound.partition, inbound.offset
                )
                out.append(route_rejection(inbound, error, self.settings.topics, self.worker_id))
                continue
            except Exception as exc:  # a decoder bug must cost one message, not the batch and the worker
                log.exception("could not decode %s[%d]@%d", inbound.topic, inbound.partition, inbound.offset)
                message = f"could not decode the message: {type(exc).__name__}: {exc}"
                out.append(
                    dead_letter(
                        inbound, ErrorCode.PROCESSING_FAILED, message, None, self.settings.topics, self.worker_id
                    )
                )
                continue
            accepted.append((inbound, doc, max(started - inbound.fetched_at, 0.0) * 1000))
        prepared = None
        if accepted and isinstance(self.engine, PreparingEngine):
            try:
                prepared = self.engine.prepare([doc for _, doc, _ in accepted])
            except Exception:  # found again, document by document, when `finish` bisects the batch
                log.warning("preparing a batch of %d raised; it is extracted unprepared", len(accepted), exc_info=True)
        return Taken(started, len(batch), out, accepted, prepared)

    def finish(self, taken: Taken) -> ProcessedBatch:
        """The engine on a taken batch, and its routing: the model's part of the batch."""
        measured = BatchMeasures(documents=taken.documents)
        out = [*taken.rejected, *self._extract_and_route(taken.accepted, measured, taken.prepared)]
        return ProcessedBatch(out, measured)

    def _extract_and_route(
        self, accepted: list[tuple[Inbound, Document, float]], measured: BatchMeasures, prepared: object | None
    ) -> list[Outgoing]:
        timings: list[Timings] = []
        whole = [prepared]  # the prepared batch serves the first call only: a bisection's halves extract

        def run(docs: Sequence[Document]) -> list[Extraction]:
            ready = whole.pop() if whole else None
            if ready is not None and isinstance(self.engine, PreparingEngine):
                engine = self.engine
                result: BatchResult = self.deadline.call(lambda _: engine.run(ready), docs)
            else:
                result = self.deadline.call(self.engine.extract, docs)
            timings.append(result.timings)
            measured.generated_tokens += result.generated_tokens
            return result.extractions

        results = run_isolated(run, [doc for _, doc, _ in accepted])
        batch_timings = sum_timings(timings)
        completed_at = datetime.now(UTC)
        if accepted:
            measured.model_timings = batch_timings
        serialise_started = time.monotonic()
        out: list[Outgoing] = []
        for (inbound, doc, queued), result in zip(accepted, results, strict=True):
            measured.queue_s.append(queued / 1000)
            try:
                if isinstance(result, Failed):
                    log.error("engine failed on %s: %r", doc.doc_id, result.error)
                    measured.engine_failures += 1
                    out.extend(
                        route_failure(inbound, doc, result.error, self.settings.topics, self.worker_id, completed_at)
                    )
                    continue
                processing = Processing(
                    worker_id=self.worker_id,
                    source_topic=inbound.topic,
                    partition=inbound.partition,
                    offset=inbound.offset,
                    received_at=inbound.received_at,
                    completed_at=completed_at,
                    batch_size=len(accepted),
                    timings=msgspec.structs.replace(batch_timings, queue_ms=queued),
                )
                measured.retries += result.retries
                out.extend(
                    route_extraction(doc, result, self.engine.info, processing, self.settings.topics, inbound.timestamp)
                )
                if self.settings.worker.audit:
                    out.append(audit_trail(doc, result, self.engine.info, processing, self.settings.topics))
            except Exception as exc:  # a routing bug must cost one document, not the batch
                log.exception("could not route %s", doc.doc_id)
                message = f"could not build the output record: {type(exc).__name__}: {exc}"
                out.append(
                    dead_letter(
                        inbound, ErrorCode.PROCESSING_FAILED, message, doc.doc_id, self.settings.topics, self.worker_id
                    )
                )
        if accepted:
            measured.serialise_s = time.monotonic() - serialise_started
        return out
