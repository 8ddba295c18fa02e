"""The review topic as a queue that people clear, one decision per Kafka transaction.

Desks join one consumer group on the review topic, so several desks share the queue by its
partitions. Within a desk, each partition's oldest undecided record is the only one that may be
shown, and to one reviewer at a time (a lease): a partition is a line that one person works down.
That is what makes a decision exactly-once with nothing but Kafka: the reviewed fields record, the
decision on the audit topic and the commit of the offset just past the record are one transaction,
and the committed offset always sits on the oldest undecided record. A desk killed mid-decision
leaves an open transaction the broker aborts; its successor reads from the committed offset and
shows the same record again. Two reviewers get different partitions' records, never the same one.
The cost: a queue is worked by at most as many people as the topic has partitions.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from schemas.messages import ReviewRecord
from streams import metrics
from streams.kafka.clients import client_config, fatal_error, polled_messages
from streams.kafka.deadline import GRACE_S, Stuck, call_timeout_s, within
from streams.review.decision import Choice, DecisionError, Position, decide, decode_review
from streams.settings import Settings

log = logging.getLogger(__name__)
_encoder = msgspec.json.Encoder()
# Records buffered per partition before it is paused: a partition is worked from its head only.
BUFFERED_MAX = 100
# Decisions this desk remembers by position, to tell a reviewer posting a stale form who decided it.
REMEMBERED_MAX = 10_000
# How often the polling thread asks the broker for a paused partition's log end (the backlog's top).
ENDS_EVERY_S = 2.0
# A consumer fenced again this soon after its replacement points at a second desk under the same id.
REFENCED_WITHIN_S = 60.0


@dataclass
class Waiting:
    """A review record read and not yet decided (`record` None: it could not be read as one)."""

    at: Position
    key: bytes | None
    record: ReviewRecord | None
    error: str | None
    # When the worker wrote it (the message's timestamp): the queue's age and time-to-decision.
    written_at: float


@dataclass
class Lease:
    reviewer: str
    until: float


@dataclass
class Shelf:
    """One partition's undecided records in offset order, and who holds its head."""

    waiting: deque[Waiting] = field(default_factory=deque)
    lease: Lease | None = None
    paused: bool = False


class NotYours(DecisionError):
    """The record is not the one this reviewer holds (decided, taken over, or moved to another desk)."""


class Queue:
    """The desk's consumer and transactional producer; `poll` from one thread, the rest from any."""

    def __init__(self, settings: Settings, instance: str, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.instance, self.clock = settings, instance, clock
        self.topic = settings.topics.review
        self.lock = threading.Lock()
        self.shelves: dict[int, Shelf] = {}
        # doc_id -> (reviewer, action) of decisions this desk made: a re-sent document says so.
        self.decided: dict[str, tuple[str, str]] = {}
        # (partition, offset) -> (reviewer, action), oldest first: "already decided" on a stale form.
        self.decided_at: dict[tuple[int, int], tuple[str, str]] = {}
        # partition -> log end asked of the broker while paused; fetched partitions use the consumer's.
        self.paused_ends: dict[int, int] = {}
        self.ends_asked = 0.0
        self.replaced_at = -REFENCED_WITHIN_S  # when the consumer was last replaced (monotonic)
        self.consumer = self._new_consumer()
        self.producer = self._new_producer()

    def _new_consumer(self) -> Consumer:
        """A static member under the desk's instance (KIP-345), as workers and sinks are: a desk
        restarted after a crash gets its partitions back at once instead of after the dead one's
        session, and a stopped desk's partitions wait that session for it."""
        consumer = Consumer(
            {
                **client_config(self.settings),
                "group.id": self.settings.review.group_id,
                "group.instance.id": f"seqstream-review-{self.instance}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": int(self.settings.kafka.session_timeout_s * 1000),
            }
        )
        consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        return consumer

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                **client_config(self.settings),
                "transactional.id": f"seqstream-review-{self.instance}",
                "transaction.timeout.ms": int(self.settings.kafka.transaction_timeout_s * 1000),
            }
        )
        timeout = call_timeout_s(self.settings.kafka)
        within(timeout + GRACE_S, "init_transactions", lambda: producer.init_transactions(timeout))
        return producer

    # The rebalance callbacks run inside `consume`, on the polling thread, which does not hold the lock there.
    # A replaced consumer's callbacks (its close) are not the desk's: the shelves follow the one in use.
    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            if consumer is not self.consumer:
                return
            for tp in partitions:
                self.shelves.setdefault(tp.partition, Shelf())

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Its new owner starts from the committed offset: the head this desk showed goes with it.
        with self.lock:
            if consumer is not self.consumer:
                return
            for tp in partitions:
                self.shelves.pop(tp.partition, None)
                self.paused_ends.pop(tp.partition, None)

    def poll(self, timeout: float = 0.2) -> int:
        """Read what arrived; returns how many records. Call from one thread only."""
        # Waited for outside the lock: a Python lock is not fair, and a poller that held it across
        # each wait and took it back at once kept the pages' threads from it for minutes.
        polled = self.consumer.consume(BUFFERED_MAX, timeout)
        if (fatal := fatal_error(polled)) is not None:
            self._replace_consumer(fatal)
            return 0
        messages = polled_messages(polled)
        with self.lock:
            for message in messages:
                self._shelve(message)
            self._pause_full()
            paused = [p for p, s in self.shelves.items() if s.paused]
        if paused and time.monotonic() - self.ends_asked >= ENDS_EVERY_S:
            self._ask_ends(paused)
        return len(messages)

    def _replace_consumer(self, error: KafkaError) -> None:
        """A static member's failure mode (streams/kafka/checkpoint.py: `replace_consumer`): after a
        broker outage longer than the session, the old member id is fenced by its own instance and
        librdkafka makes that fatal. A new consumer rejoins as the instance and reads from the
        committed offset, the oldest undecided record: every shelf (and hold) starts over."""
        log.warning("review consumer failed fatally (%s); a new one rejoins as this desk", error.str())
        now = time.monotonic()
        if now - self.replaced_at < REFENCED_WITHIN_S:
            # Outages that long do not come a minute apart: two desks share the id and fence each other.
            log.error(
                "this desk was fenced again within %.0f s: is another desk running with --instance %s? "
                "Each desk needs its own.",
                REFENCED_WITHIN_S,
                self.instance,
            )
        self.replaced_at = now
        fresh = self._new_consumer()
        with self.lock:
            old, self.consumer = self.consumer, fresh
            self.shelves.clear()
            self.paused_ends.clear()
        # Not under the lock: closing may call `_revoked`, which takes it.
        with contextlib.suppress(KafkaException, RuntimeError):
            old.close()

    def _ask_ends(self, partitions: list[int]) -> None:
        """A paused partition is not fetched, so the consumer's cached log end stops where the pause
        began and the backlog with it; the broker is asked here, on the polling thread, because one
        answer can take half a second and a scrape of /metrics must not wait for it."""
        self.ends_asked = time.monotonic()
        ends = {}
        for partition in partitions:
            try:
                tp = TopicPartition(self.topic, partition)
                ends[partition] = self.consumer.get_watermark_offsets(tp, call_timeout_s(self.settings.kafka))[1]
            except KafkaException as exc:
                log.warning("log end of %s[%d] not read (%s): the backlog keeps the last", self.topic, partition, exc)
        with self.lock:
            self.paused_ends.update(ends)

    def _shelve(self, message: Message) -> None:
        shelf = self.shelves.setdefault(message.partition(), Shelf())
        try:
            record, error = decode_review(message.value()), None
        except (msgspec.DecodeError, TypeError) as exc:
            record, error = None, f"not a review record: {exc}"
        _, stamp = message.timestamp()
        at = Position(message.topic(), message.partition(), message.offset())
        shelf.waiting.append(Waiting(at, message.key(), record, error, stamp / 1000 if stamp > 0 else self.clock()))

    def _pause_full(self) -> None:
        for partition, shelf in self.shelves.items():
            full = len(shelf.waiting) >= BUFFERED_MAX
            if full != shelf.paused:
                tp = [TopicPartition(self.topic, partition)]
                self.consumer.pause(tp) if full else self.consumer.resume(tp)
                shelf.paused = full

    def backlog(self) -> dict[int, int]:
        """Per partition held: records not yet decided, read or not (log end minus the oldest undecided)."""
        out = {}
        with self.lock:
            for partition, shelf in self.shelves.items():
                tp = TopicPartition(self.topic, partition)
                first = shelf.waiting[0].at.offset if shelf.waiting else self.consumer.position([tp])[0].offset
                end = self.consumer.get_watermark_offsets(tp, cached=True)[1]
                if shelf.paused:
                    end = max(end, self.paused_ends.get(partition, end))
                out[partition] = max(end - first, 0) if end >= 0 and first >= 0 else len(shelf.waiting)
        return out

    def depth(self) -> int:
        with self.lock:
            return sum(len(s.waiting) for s in self.shelves.values())

    def next_for(self, reviewer: str) -> Waiting | None:
        """The record this reviewer holds, else the head of a partition nobody holds (now theirs)."""
        now = self.clock()
        with self.lock:
            for shelf in self._by_partition():
                if shelf.waiting and shelf.lease and shelf.lease.reviewer == reviewer:
                    shelf.lease.until = now + self.settings.review.lease_s
                    return shelf.waiting[0]
            for shelf in self._by_partition():
                if shelf.waiting and (shelf.lease is None or shelf.lease.until < now):
                    shelf.lease = Lease(reviewer, now + self.settings.review.lease_s)
                    return shelf.waiting[0]
        return None

    def _by_partition(self) -> list[Shelf]:
        return [self.shelves[p] for p in sorted(self.shelves)]

    def newer(self, waiting: Waiting) -> Waiting | None:
        """A later record of the same document waiting on this desk: the one shown is superseded."""
        if waiting.record is None:
            return None
        doc_id = waiting.record.doc_id
        with self.lock:
            later = [
                w for s in self.shelves.values() for w in s.waiting
                if w.record is not None and w.record.doc_id == doc_id and _later(w, waiting)
            ]  # fmt: skip
        return max(later, key=lambda w: (w.written_at, w.at.offset), default=None)

    def decide(self, at: Position, choice: Choice) -> Waiting:
        """Write the decision on the record at `at` and commit past it, in one transaction."""
        with self.lock:
            shelf = self.shelves.get(at.partition)
            head = shelf.waiting[0] if shelf and shelf.waiting else None
            if head is None or head.at != at or shelf.lease is None or shelf.lease.reviewer != choice.reviewer:
                raise NotYours(self._why_not_yours(at, head))
            action = "rejected"
            if head.record is None:
                outputs = []  # an unreadable record can only be rejected: its reason is the decision
                if choice.action != "reject":
                    raise DecisionError(f"{head.error}: it can only be rejected")
            else:
                fields, decision = decide(head.record, at, choice, datetime.now(UTC))
                action = decision.action
                key = head.record.doc_id.encode()
                audit_key = f"{head.record.doc_id}#review@{at.partition}:{at.offset}".encode()
                outputs = [(self.settings.topics.audit, audit_key, _encoder.encode(decision))]
                if fields is not None:
                    outputs.append((self.settings.topics.fields, key, _encoder.encode(fields)))
            self._transact(outputs, TopicPartition(at.topic, at.partition, at.offset + 1))
            metrics.observe_review_decision(action, self.clock() - head.written_at)
            shelf.waiting.popleft()
            shelf.lease = None
            if head.record is not None:
                self.decided[head.record.doc_id] = (choice.reviewer, action)
            self.decided_at[(at.partition, at.offset)] = (choice.reviewer, action)
            if len(self.decided_at) > REMEMBERED_MAX:
                del self.decided_at[next(iter(self.decided_at))]
            return head

    def _why_not_yours(self, at: Position, head: Waiting | None) -> str:
        where = f"{at.topic}[{at.partition}]@{at.offset}"
        if (by := self.decided_at.get((at.partition, at.offset))) is not None:
            return f"{where} was already decided by {by[0]} ({by[1]}): reload the page for the next record"
        if head is not None and head.at.offset > at.offset:
            return f"{where} was already decided: reload the page for the next record"
        if at.partition not in self.shelves:
            return f"{where} is now on another desk (the group moved its partition): reload the page"
        return f"{where} is not the record you hold (your hold ran out, or another reviewer has it): reload the page"

    def _transact(self, outputs: list[tuple[str, bytes, bytes]], commit: TopicPartition) -> None:
        """One transaction: the outputs and the review offset. librdkafka may block past its own
        timeout once the coordinator was away (streams/kafka/deadline.py): such a producer is
        abandoned and a new one, under the same transactional id, fences it and aborts its transaction."""
        timeout = call_timeout_s(self.settings.kafka)

        def call(what: str, run: Callable[[], None]) -> None:
            within(timeout + GRACE_S, what, run)

        group = self.consumer.consumer_group_metadata()
        try:
            call("begin_transaction", self.producer.begin_transaction)
            for topic, key, value in outputs:
                self.producer.produce(topic, value, key)
            call(
                "send_offsets_to_transaction",
                lambda: self.producer.send_offsets_to_transaction([commit], group, timeout),
            )
            call("commit_transaction", lambda: self.producer.commit_transaction(timeout))
        except Stuck as exc:
            log.warning("review decision not written (%s): a new producer fences this one", exc)
            self.producer = self._new_producer()
            raise DecisionError(f"the decision could not be written ({exc}): try again") from exc
        except KafkaException as exc:
            log.warning("review decision not written (%s): aborting", exc)
            try:
                call("abort_transaction", lambda: self.producer.abort_transaction(timeout))
            except (KafkaException, Stuck):
                # A producer that cannot abort (fenced, fatal) is replaced; the next decision uses the new one.
                self.producer = self._new_producer()
            raise DecisionError(f"the decision could not be written ({exc.args[0].str()}): try again") from exc

    def close(self) -> None:
        self.consumer.close()  # not under the lock: closing calls `_revoked`, which takes it
        with self.lock:
            self.producer.flush(5)


def _later(one: Waiting, than: Waiting) -> bool:
    """Written after: by offset in one partition (a document's key keeps its versions in one, and
    two writes may share a millisecond), by the write time across partitions."""
    if one.at.partition == than.at.partition:
        return one.at.offset > than.at.offset
    return one.written_at > than.written_at
