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

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec
from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from schemas.messages import ReviewRecord
from streams.kafka.clients import client_config, polled_messages
from streams.review.decision import Choice, DecisionError, Position, decide, decode_review
from streams.settings import Settings

log = logging.getLogger(__name__)
_encoder = msgspec.json.Encoder()
# Records buffered per partition before it is paused: a partition is worked from its head only.
BUFFERED_MAX = 100


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
        self.consumer = Consumer(
            {
                **client_config(settings),
                "group.id": settings.review.group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                **client_config(self.settings),
                "transactional.id": f"seqstream-review-{self.instance}",
                "transaction.timeout.ms": int(self.settings.kafka.transaction_timeout_s * 1000),
            }
        )
        producer.init_transactions(self.settings.kafka.transaction_timeout_s)
        return producer

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.shelves.setdefault(tp.partition, Shelf())

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Its new owner starts from the committed offset: the head this desk showed goes with it.
        for tp in partitions:
            self.shelves.pop(tp.partition, None)

    def poll(self, timeout: float = 0.2) -> int:
        """Read what arrived; returns how many records. Call from one thread only."""
        with self.lock:
            messages = polled_messages(self.consumer.consume(BUFFERED_MAX, timeout))
            for message in messages:
                self._shelve(message)
            self._pause_full()
        return len(messages)

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
                if w.record is not None and w.record.doc_id == doc_id and w.written_at > waiting.written_at
            ]  # fmt: skip
        return max(later, key=lambda w: w.written_at, default=None)

    def decide(self, at: Position, choice: Choice) -> Waiting:
        """Write the decision on the record at `at` and commit past it, in one transaction."""
        with self.lock:
            shelf = self.shelves.get(at.partition)
            head = shelf.waiting[0] if shelf and shelf.waiting else None
            if head is None or head.at != at or shelf.lease is None or shelf.lease.reviewer != choice.reviewer:
                raise NotYours(f"{at.topic}[{at.partition}]@{at.offset} is not the record you hold: reload the page")
            if head.record is None:
                outputs = []  # an unreadable record can only be rejected: its reason is the decision
                if choice.action != "reject":
                    raise DecisionError(f"{head.error}: it can only be rejected")
            else:
                fields, decision = decide(head.record, at, choice, datetime.now(UTC))
                key = head.record.doc_id.encode()
                audit_key = f"{head.record.doc_id}#review@{at.partition}:{at.offset}".encode()
                outputs = [(self.settings.topics.audit, audit_key, _encoder.encode(decision))]
                if fields is not None:
                    outputs.append((self.settings.topics.fields, key, _encoder.encode(fields)))
            self._transact(outputs, TopicPartition(at.topic, at.partition, at.offset + 1))
            shelf.waiting.popleft()
            shelf.lease = None
            if head.record is not None:
                self.decided[head.record.doc_id] = (choice.reviewer, choice.action)
            return head

    def _transact(self, outputs: list[tuple[str, bytes, bytes]], commit: TopicPartition) -> None:
        timeout = self.settings.kafka.transaction_timeout_s
        try:
            self.producer.begin_transaction()
            for topic, key, value in outputs:
                self.producer.produce(topic, value, key)
            self.producer.send_offsets_to_transaction([commit], self.consumer.consumer_group_metadata(), timeout)
            self.producer.commit_transaction(timeout)
        except KafkaException as exc:
            log.warning("review decision not written (%s): aborting", exc)
            try:
                self.producer.abort_transaction(timeout)
            except KafkaException:
                # A producer that cannot abort (fenced, fatal) is replaced; the next decision uses the new one.
                self.producer = self._new_producer()
            raise DecisionError(f"the decision could not be written ({exc.args[0].str()}): try again") from exc

    def close(self) -> None:
        with self.lock:
            self.consumer.close()
            self.producer.flush(5)
