"""Exactly-once delivery: the same pipeline as the Faust agent, on confluent-kafka's transactions.

Each micro-batch's output records and its input offsets go into one Kafka transaction
(`send_offsets_to_transaction`, then `commit_transaction`): readers with `isolation.level=
read_committed` see a batch's records once, or not at all while it is being redone. A worker killed
mid-batch leaves an open transaction that the broker aborts (at once when the restarted worker
reuses its transactional id, else after `kafka.transaction_timeout_s`), and its batch is consumed
again from the committed offsets.

Why not Faust's `processing_guarantee="exactly_once"`: faust-streaming has open reports of
duplicates after a kill under read_committed (#517), of sends outside the transaction (#177) and of
crashes on rebalance (#323). The transaction opens only after the model is done with the batch, so
it spans the writes alone and stays short whatever the model's speed.

Batch t+1 is polled and taken (decoded, tokenised, grammars built) on a thread of its own while the
model runs batch t on another, as in the other modes, and as late as the Faust agent takes it
(streams/flow/driver.py). Its offsets are committed only in its own transaction, so it is dropped,
and consumed again, wherever batch t is not committed (its partitions rewound) or a rebalance came
in between (the next owner starts from the committed offsets).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streams.flow.driver import BatchDriver
from streams.flow.pipeline import Pipeline, Taken
from streams.flow.routing import Outgoing
from streams.kafka.backoff import Backoff
from streams.kafka.checkpoint import Checkpoint, first_offsets, next_offsets
from streams.kafka.clients import client_config, fatal_error, polled_messages
from streams.kafka.deadline import GRACE_S, Stuck, call_timeout_s, within
from streams.kafka.inbound import Inbound
from streams.kafka.membership import membership
from streams.observe.http import worker_server
from streams.settings import Settings, transactional_id

log = logging.getLogger(__name__)

# The longest pause between two tries of a failing transaction or transactional call.
RETRY_PAUSE_MAX_S = 5.0
# New producers tried for one batch's kept results before the batch is consumed again instead.
WRITE_AGAIN_MAX = 3
# How long the worker waits for a first message when it holds no batch.
FIRST_WAIT_S = 1.0


class Outcome(enum.Enum):
    """What became of one try at a batch's transaction."""

    COMMITTED = "committed"
    # Aborted, and the consumer rewound to the batch's start: it is consumed (and extracted) again.
    REWOUND = "rewound"
    # Failed fatally; a new producer is ready to write the same results in a new transaction.
    WRITE_AGAIN = "write again"


@dataclass
class Ahead:
    """A polled batch and its taking (decode, prompts, grammars) on the prepare thread."""

    batch: list[Inbound]
    taken: Future[Taken]

    def partitions(self) -> set[tuple[str, int]]:
        return {(i.topic, i.partition) for i in self.batch}


class TransactionalWorker:
    def __init__(self, settings: Settings, pipeline: Pipeline) -> None:
        self.settings = settings
        self.pipeline = pipeline
        # Every transactional call waits at most this long (librdkafka's timeout, then the deadline).
        self.call_timeout_s = call_timeout_s(settings.kafka)
        # Static membership: restarted, it takes its partitions back at once (streams/kafka/membership.py).
        self.membership = membership(settings.kafka.group_instance_id, settings.worker.app_id)
        self.consumer = self._new_consumer()
        self.checkpoint = Checkpoint(self.consumer)
        # Partitions revoked since the batch in hand was polled: its results must not be committed.
        self.revoked: set[tuple[str, int]] = set()
        self.producer = self._new_producer()
        self.driver = BatchDriver(pipeline, settings.topics, settled="committed", writing="transaction")
        # While brokers are short (NOT_ENOUGH_REPLICAS) a batch fails to commit again and again:
        # a growing pause between tries instead of redoing it at once (streams/kafka/backoff.py).
        # Short at most: each try already waits on the broker, and a long pause would outlast it.
        self.backoff = Backoff(max_s=RETRY_PAUSE_MAX_S)

    def _new_consumer(self) -> Consumer:
        k, b = self.settings.kafka, self.settings.batch
        consumer = Consumer(
            {
                **client_config(self.settings),
                **self.membership.consumer_config(),
                "group.id": self.settings.worker.app_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                # Upstream producers may be transactional too; never act on an aborted document.
                "isolation.level": "read_committed",
                "session.timeout.ms": int(k.session_timeout_s * 1000),
                "max.poll.interval.ms": int(k.max_poll_interval_s * 1000),
                "max.partition.fetch.bytes": k.max_partition_fetch_bytes,
                # Back-pressure: the prefetch queue holds what the Faust app's stream buffer would.
                "queued.max.messages.kbytes": max(b.buffer_documents * b.max_document_bytes // 1024, 1024),
                "queued.min.messages": b.buffer_documents,
            }
        )
        consumer.subscribe([self.settings.topics.raw], on_assign=self._on_assign, on_revoke=self._on_revoke)
        return consumer

    def _new_producer(self) -> Producer:
        """A producer whose init_transactions fenced every earlier one with this transactional id
        (in this process or a killed one) and aborted its open transaction."""
        producer = Producer(
            {
                **client_config(self.settings),
                "transactional.id": transactional_id(self.settings.worker),
                "transaction.timeout.ms": int(self.settings.kafka.transaction_timeout_s * 1000),
                "message.max.bytes": self.settings.topics.dead_letter_max_message_bytes,
                "linger.ms": 5,
            }
        )
        try:
            self._retrying("init_transactions", lambda: producer.init_transactions(self.call_timeout_s))
        except Stuck as exc:
            log.warning("%s; a new producer tries again", exc)
            return self._new_producer()
        return producer

    def run(self, stop: threading.Event) -> None:
        """Until `stop` is set: finishes the batch in hand, then closes (static: its place waits)."""
        server = worker_server(self.settings, self.pipeline.engine, lambda: set(self.checkpoint.assigned))
        log.info(
            "exactly-once worker ready (transactional id %s, group instance %s)",
            transactional_id(self.settings.worker),
            self.membership.instance_id or "dynamic",
        )
        # One slot: the worker holds at most two batches beside the consumer's prefetch.
        ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        # Where the next batch is to be polled late, the model runs on a thread of its own meanwhile
        # (librdkafka's consumer stays on this thread).
        model = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        held: Ahead | None = None
        try:
            while not stop.is_set():
                held = self._process(held, ahead, model) if held else self._take(ahead, FIRST_WAIT_S)
        finally:
            model.shutdown()
            ahead.shutdown(cancel_futures=True)  # a batch taken ahead was never committed: consumed again
            if server is not None:
                server.stop()
            self.consumer.close()
            self.producer.flush(self.call_timeout_s)
            self.membership.release()

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.checkpoint.assign(partitions)
        log.info("assigned %s", sorted(self.checkpoint.assigned))

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Called inside a poll; the batch in hand, polled before, is checked against these after it.
        self.checkpoint.revoke(partitions)
        self.revoked |= {(tp.topic, tp.partition) for tp in partitions}

    def _take(self, pool: ThreadPoolExecutor, wait_s: float, window_s: float | None = None) -> Ahead | None:
        """The next batch, polled here and taken on the prepare thread; None when none came."""
        batch = self._next_batch(wait_s, window_s)
        return Ahead(batch, pool.submit(self.driver.take, batch)) if batch else None

    def _next_batch(self, wait_s: float, window_s: float | None = None) -> list[Inbound]:
        """Wait up to `wait_s` for one message, then at most `window_s` (the batch window) for the rest."""
        first = self.consumer.poll(wait_s)
        if first is None:
            return []
        first_fetched_at = time.monotonic()
        window_s = self.settings.batch.window_ms / 1000 if window_s is None else window_s
        rest = self.consumer.consume(self.settings.batch.max_documents - 1, timeout=window_s)
        rest_fetched_at = time.monotonic()
        if (fatal := fatal_error([first, *rest])) is not None:
            self.consumer = self.checkpoint.replace_consumer(fatal, self._new_consumer, self.membership.instance_id)
            return []
        received_at = datetime.now(UTC)
        batch = [Inbound.of(m, received_at, first_fetched_at) for m in polled_messages([first], _warn)]
        return batch + [Inbound.of(m, received_at, rest_fetched_at) for m in polled_messages(rest, _warn)]

    def _process(self, held: Ahead, pool: ThreadPoolExecutor, model: ThreadPoolExecutor) -> Ahead | None:
        """The batch in hand through the model and its transaction, the next one taken meanwhile;
        returns that next one, or None where it was dropped to be consumed again."""
        started = time.monotonic()
        taken = held.taken.result()
        waited_s = time.monotonic() - started
        consumer, self.revoked = self.consumer, set()
        # The next batch is what the consumer has fetched by then, without waiting. After a full
        # batch it is taken at once and the model runs here; else the model runs on its own thread
        # while this one waits to take it late enough to hold what arrives (streams/flow/driver.py).
        delay_s = self.driver.look_ahead_s(self.settings.batch.max_documents)
        if delay_s == 0:
            following = self._take(pool, 0, 0)
            processed = self.driver.finish(taken, waited_s)
        else:
            finishing = model.submit(self.driver.finish, taken, waited_s)
            wait([finishing], timeout=delay_s)
            following = self._take(pool, 0, 0)
            processed = finishing.result()
        if self.consumer is not consumer or self.revoked & held.partitions():
            # A rebalance, or a new consumer, while the batch was in hand: its partitions' new owner
            # (or this worker's new consumer) starts from the committed offsets, so neither is kept.
            log.info("partitions moved with a batch in hand: it is consumed again, not committed")
            self.checkpoint.rewind([*held.batch, *(following.batch if following else [])])
            return None
        batch = held.batch
        produce_started = time.monotonic()
        for _ in range(WRITE_AGAIN_MAX):
            outcome = self._commit(batch, processed.outgoing)
            if outcome is Outcome.REWOUND:
                return self._drop(following, held)
            if outcome is Outcome.COMMITTED:
                break
            # WRITE_AGAIN: the batch's results are kept and written again in a new transaction,
            # not sent through the model a second time (a batch costs seconds on the model).
        else:
            # Failing fatally each time is not the producer's doing (a fenced consumer's group
            # metadata, say): the batch goes back to the consumer, which gets its own remedy.
            self.checkpoint.rewind(batch)
            return self._drop(following, held)
        # The transaction's own time (writes and commit, the model excluded) is what must stay well
        # inside kafka.transaction_timeout_s; ops/RELIABILITY.md quotes it from the batch's log line.
        self.driver.delivered(processed, started, time.monotonic() - produce_started)
        return following

    def _drop(self, following: Ahead | None, rewound: Ahead) -> None:
        """The batch taken ahead of one that was rewound goes back too: where it shares a partition
        with that one the rewind covers it, elsewhere it is rewound to its own first message."""
        if following is not None:
            shared = rewound.partitions()
            self.checkpoint.rewind([i for i in following.batch if (i.topic, i.partition) not in shared])

    def _commit(self, batch: list[Inbound], outgoing: list[Outgoing]) -> Outcome:
        """One transaction for the batch's records and offsets: committed, aborted and rewound (to be
        consumed again), or failed fatally with a new producer ready for the same results."""
        try:
            self._call("begin_transaction", self.producer.begin_transaction)
            for o in outgoing:
                self._produce(o)
            offsets, group = next_offsets(batch), self.consumer.consumer_group_metadata()
            t = self.call_timeout_s
            self._call(
                "send_offsets_to_transaction", lambda: self.producer.send_offsets_to_transaction(offsets, group, t)
            )
        except Stuck as exc:
            # The coordinator is gone and librdkafka waits past its own timeout (the 75 s stall this
            # replaced): abandon that producer at once; a new one fences it and aborts its transaction.
            return self._start_over(batch, str(exc))
        except KafkaException as exc:
            return self._abort(batch, exc.args[0])
        try:
            self._retrying("commit_transaction", lambda: self.producer.commit_transaction(self.call_timeout_s))
        except Stuck as exc:
            # Committed or not is unknown; a new producer's init_transactions settles it (the
            # coordinator completes or aborts it first), then the group's committed offsets say.
            log.warning("%s; a new producer settles the transaction, the batch resumes from the committed offsets", exc)
            self.producer = self._new_producer()
            self._seek_committed(batch)
            return Outcome.REWOUND
        except KafkaException as exc:
            return self._abort(batch, exc.args[0])
        self.backoff.reset()
        return Outcome.COMMITTED

    def _abort(self, batch: list[Inbound], error: KafkaError) -> Outcome:
        """After a failed transactional call: aborted and rewound, or a new producer (`_start_over`)."""
        if error.fatal():
            return self._start_over(batch, error.str())
        try:
            # Once: a retriable failure here (TIMED_OUT) means the coordinator is gone, and another
            # try on this producer is what hung for 75 s after an outage (its state is unknown).
            self._call("abort_transaction", lambda: self.producer.abort_transaction(self.call_timeout_s))
        except (KafkaException, Stuck) as exc:
            reason = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
            return self._start_over(batch, f"{error.str()}, then abort_transaction: {reason}")
        delay = self.backoff.next()
        log.warning("transaction aborted (%s); the batch will be consumed again in %.1f s", error.str(), delay)
        self.checkpoint.rewind(batch)
        time.sleep(delay)
        return Outcome.REWOUND

    def _seek_committed(self, batch: list[Inbound]) -> None:
        """Position the batch's partitions at the group's committed offsets (the transaction's
        outcome, once settled): after a commit that may or may not have happened."""
        while True:
            try:
                committed = self.consumer.committed(first_offsets(batch), timeout=self.call_timeout_s)
                break
            except KafkaException as exc:
                log.warning("committed offsets: %s; trying again", exc.args[0].str())
                time.sleep(self.backoff.next())
        self.checkpoint.rewind(batch)  # none committed yet on a partition: the batch's start is its start
        for tp in (tp for tp in committed if tp.offset >= 0 and self.checkpoint.holds(tp)):
            self.consumer.seek(tp)

    def _start_over(self, batch: list[Inbound], error: KafkaError | str) -> Outcome:
        """After a fatal transactional error: a new producer under the same id, and the batch's
        results written again with it (WRITE_AGAIN), or the batch consumed again (REWOUND) where a
        partition of it was revoked meanwhile (its new owner starts from the committed offset).

        A broker lost mid-transaction can leave the producer unusable: its records time out while
        the partition's leadership moves, the coordinator aborts the transaction on its timeout,
        and the abort that follows is refused (INVALID_TXN_STATE). A new producer's
        init_transactions fences the old one and starts clean; exiting would cost a restart and
        the model's reload for the same result. Fenced by a newer worker with this id, though,
        this one is the zombie: it exits (the supervisor decides whether it comes back).
        """
        if isinstance(error, KafkaError) and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
            raise KafkaException(error)
        delay = self.backoff.next()
        keep = {(i.topic, i.partition) for i in batch} <= self.checkpoint.assigned
        log.warning(
            "transaction failed (%s); a new producer writes the batch's %s again in %.1f s",
            error if isinstance(error, str) else error.str(),
            "results" if keep else "documents (a partition was revoked: consumed and extracted)",
            delay,
        )
        self.producer = self._new_producer()
        time.sleep(delay)
        if keep:
            return Outcome.WRITE_AGAIN
        self.checkpoint.rewind(batch)
        return Outcome.REWOUND

    def _produce(self, o: Outgoing) -> None:
        while True:
            try:
                self.producer.produce(o.topic, key=o.key, value=o.value)
                return
            except BufferError:  # the local queue is full: let deliveries drain first
                self.producer.poll(0.1)

    def _call(self, what: str, call: Callable[[], None]) -> None:
        within(self.call_timeout_s + GRACE_S, what, call)

    def _retrying(self, what: str, call: Callable[[], None]) -> None:
        """A transactional call, again while it fails retriably (the broker is away for a while);
        Stuck where one try outlives its deadline."""
        backoff = Backoff(max_s=RETRY_PAUSE_MAX_S)
        while True:
            try:
                self._call(what, call)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                delay = backoff.next()
                log.warning("%s: %s; trying again in %.1f s", what, exc.args[0].str(), delay)
                time.sleep(delay)


def _warn(error: KafkaError) -> None:
    log.warning("consumer: %s", error.str())
