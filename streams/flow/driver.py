"""The one path a micro-batch takes, whoever drives it: the Faust agent (streams/workers/faust_app.py), the
exactly-once worker (streams/workers/transactional.py) and `seqstream extract` (streams/cli/main.py).

A driver fetches messages and hands them over as `Inbound`s (streams/kafka/inbound.py), each keeping
when it was fetched, so its queue time counts, and when its batch was taken; from there every mode
goes the same way:

1. `take` (decode, prompts, grammars: host work, on a prepare thread one batch ahead) and `finish`
   (the model and routing, on the model thread, and the metrics of what it measured);
2. the driver writes the outputs and, once the broker acknowledged all of them, acknowledges the
   input offsets (Faust acks, a transaction commits, a file is written): only this differs by mode;
3. `delivered`: the output and input counts, the produce stage and the batch's log line.

Steps 1 and 3 are the same calls in every mode, so a look-ahead (preparing the next batch while
this one decodes, its offsets still acknowledged only after its own outputs) changes what happens
between them here and in the drivers' loops, not three copies of the steps.

When to take the look-ahead matters at low load. Taken as the model starts batch t, batch t+1 holds
only what had arrived by then (often one document), and whatever arrives during t waits for t+2; a
batch's decode lasts for its longest answer whatever its size, so that doubles the latency and
halves what the model does per pass. `look_ahead_s` says how long after `finish` starts to take it:
late enough to hold what arrived meanwhile, early enough to be prepared before the model is free.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from streams import metrics
from streams.flow.pipeline import Pipeline, ProcessedBatch, Taken
from streams.flow.routing import outcome_of_topic
from streams.kafka.inbound import Inbound
from streams.settings import TopicSettings

log = logging.getLogger(__name__)

# The look-ahead is taken this many of the last batch's preparation times before the model is
# expected to be free: room for a next batch larger than the last.
PREPARE_LEAD = 2.0


class BatchDriver:
    def __init__(
        self, pipeline: Pipeline, topics: TopicSettings, settled: str = "done", writing: str = "produce"
    ) -> None:
        """`settled` and `writing`: what the log line calls a delivered batch and the time spent
        writing it in this mode (e.g. `committed` and `transaction`)."""
        self.pipeline = pipeline
        self.outcome_of = outcome_of_topic(topics)
        self.settled = settled
        self.writing = writing
        # The last batch's preparation and model time, seconds: when to take the next one.
        self.take_s = 0.0
        self.finish_s = 0.0
        self.last_documents = 0

    def take(self, batch: Sequence[Inbound]) -> Taken:
        """The batch decoded and prepared for the engine: host work, which a driver may do for batch
        t+1 on another thread while `finish` runs batch t (its offsets wait for its own outputs)."""
        started = time.monotonic()
        taken = self.pipeline.take(batch)
        self.take_s = time.monotonic() - started
        return taken

    def look_ahead_s(self, max_documents: int) -> float:
        """How long after a batch's `finish` starts to take the next batch: the last batch's model
        time less PREPARE_LEAD of its preparation times. At once before any batch finished, and
        after a full batch: more were waiting, so the next is full whenever it is taken."""
        if self.last_documents >= max_documents:
            return 0.0
        return max(0.0, self.finish_s - PREPARE_LEAD * self.take_s)

    def finish(self, taken: Taken, prepare_wait_s: float) -> ProcessedBatch:
        """The engine and routing on a taken batch (on the model thread), and the metrics of the work.

        Recorded at once, not on delivery: a batch whose outputs are not acknowledged is processed
        again, and both runs of the model were real work. `prepare_wait_s`: how long the model
        waited for the batch to be taken (all of it when it was not taken ahead)."""
        metrics.observe_stage("prepare_wait", prepare_wait_s)
        started = time.monotonic()
        processed = self.pipeline.finish(taken)
        m = processed.measured
        self.finish_s, self.last_documents = time.monotonic() - started, m.documents
        metrics.BATCH_DOCUMENTS.observe(m.documents)
        for queued_s in m.queue_s:
            metrics.observe_stage("queue", queued_s)
        metrics.GENERATED_TOKENS.inc(m.generated_tokens)
        metrics.VALIDATION_RETRIES.inc(m.retries)
        metrics.ENGINE_FAILURES.inc(m.engine_failures)
        if m.model_timings is not None:
            metrics.observe_model_timings(m.model_timings)
            metrics.record_gpu_memory(self.pipeline.engine.info.device)
        if m.serialise_s is not None:
            metrics.observe_stage("serialise", m.serialise_s)
        return processed

    def delivered(self, processed: ProcessedBatch, started: float, produce_s: float) -> None:
        """After the broker acknowledged every output of the batch and its offsets are acknowledged.

        `started`: `time.monotonic()` when the driver took the batch; `produce_s`: writing until acknowledged."""
        metrics.observe_stage("produce", produce_s)
        metrics.count_outputs((self.outcome_of[o.topic], o.submitted_at, o.raw_timestamp) for o in processed.outgoing)
        metrics.INPUT_MESSAGES.inc(processed.measured.documents)
        log.info(
            "batch of %d %s in %.0f ms (%s %.0f ms): %d messages written",
            processed.measured.documents,
            self.settled,
            (time.monotonic() - started) * 1000,
            self.writing,
            produce_s * 1000,
            len(processed.outgoing),
        )
