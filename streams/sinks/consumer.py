"""A sink's consumer, the same for every sink (streams/sinks/base.py): poll, write and flush each poll
through the sink, rewind and pause when that fails, resume each partition where the sink says.

The sink, not the group's commits, says where each partition resumes (on assignment). The group's
Kafka offsets are committed only after the sink's flush, for lag monitoring; they are never read back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.kafka.backoff import Backoff
from streams.kafka.checkpoint import Checkpoint
from streams.kafka.clients import client_config, fatal_error, polled_messages
from streams.kafka.inbound import Inbound
from streams.kafka.membership import membership
from streams.settings import Settings
from streams.sinks.base import DeliveryFailed, Sink

log = logging.getLogger(__name__)

RETRY_PAUSE_MAX_S = 30.0
# A group join takes a second or two; past this, a sink with no partitions says what it waits for.
WAITING_NOTICE_AFTER_S = 5.0


class SinkConsumer:
    """Consumes `topic` (the fields topic by default) into `sink` until stopped."""

    def __init__(self, settings: Settings, sink: Sink, topic: str | None = None) -> None:
        self.settings = settings
        self.sink = sink
        self.topic = topic or settings.topics.fields
        # Static membership: restarted, it takes its partitions back at once (streams/kafka/membership.py).
        self.membership = membership(settings.kafka.group_instance_id, settings.sink.group_id)
        self.consumer = self._new_consumer()
        self.checkpoint = Checkpoint(self.consumer)
        self.backoff = Backoff(max_s=RETRY_PAUSE_MAX_S)
        self.consumed = 0

    def _new_consumer(self) -> Consumer:
        consumer = Consumer(
            {
                **client_config(self.settings),
                **self.membership.consumer_config(),
                "group.id": self.settings.sink.group_id,
                "enable.auto.commit": False,
                # The offsets we start from come from the sink; these only matter for partitions
                # it has never seen (and offsets compacted or expired away).
                "auto.offset.reset": "earliest",
                # An exactly-once worker's aborted batches must never become rows.
                "isolation.level": "read_committed",
                "session.timeout.ms": int(self.settings.kafka.session_timeout_s * 1000),
                "max.poll.interval.ms": int(self.settings.kafka.max_poll_interval_s * 1000),
            }
        )
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        return consumer

    def run(self, stop: threading.Event) -> None:
        """Until `stop` is set: finishes the poll in hand, then closes (static: its place in the group waits for it)."""
        self.sink.setup()
        log.info(
            "%s sink ready: %s -> %s (group %s, instance %s)",
            self.sink.name,
            self.topic,
            self.sink.destination,
            self.settings.sink.group_id,
            self.membership.instance_id or "dynamic",
        )
        waiting = WaitingForPartitions(self.settings, time.monotonic())
        try:
            while not stop.is_set():
                messages = self._poll()
                waiting.check(bool(self.checkpoint.assigned), time.monotonic())
                if not messages:
                    continue
                try:
                    resume = self.sink.apply(messages)
                except (*self.sink.retriable, DeliveryFailed, KafkaException) as exc:
                    # Nothing of the poll is stored: the same messages again, later.
                    delay = self.backoff.next()
                    log.warning("poll not applied (%s); retrying in %.1f s", exc, delay)
                    self.checkpoint.rewind(messages)
                    stop.wait(delay)
                    continue
                self.backoff.reset()
                self.consumed += len(messages)
                self._commit_for_lag(resume)
                log.debug("applied %d messages", len(messages))
        finally:
            self.consumer.close()
            self.sink.close()
            self.membership.release()
            log.info("%s sink stopped after %d messages consumed", self.sink.name, self.consumed)

    def _poll(self) -> list[Inbound]:
        polled = self.consumer.consume(self.settings.sink.max_records, timeout=self.settings.sink.poll_timeout_s)
        if (fatal := fatal_error(polled)) is not None:
            self.consumer = self.checkpoint.replace_consumer(fatal, self._new_consumer, self.membership.instance_id)
            return []
        received_at, fetched_at = datetime.now(UTC), time.monotonic()
        return [
            Inbound.of(m, received_at, fetched_at)
            for m in polled_messages(polled, lambda error: log.warning("consumer: %s", error.str()))
        ]

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        stored = self.sink.resume_offsets(self.topic, [tp.partition for tp in partitions])
        for tp in partitions:
            tp.offset = stored[tp.partition]
        consumer.assign(partitions)
        self.checkpoint.assign(partitions)
        log.info("assigned %s from the sink's offsets %s", self.topic, dict(sorted(stored.items())))

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Nothing in flight: each poll is flushed before the next, where rebalances happen.
        self.checkpoint.revoke(partitions)

    def _commit_for_lag(self, resume: list[TopicPartition]) -> None:
        try:
            self.checkpoint.commit(resume)
        except KafkaException as exc:  # lag monitoring only: the sink holds the real offsets
            log.debug("lag commit failed: %s", exc)


@dataclass
class WaitingForPartitions:
    """Says once, a few seconds after start-up, why a sink with no partitions is silent.

    A member that died without leaving the group (SIGKILL; or a static member, which never leaves)
    holds its partitions until its session ends; a sink restarted meanwhile under another instance
    id waits for that, and without this line it would sit silent after "ready".
    """

    settings: Settings
    since: float
    told: bool = False

    def check(self, assigned: bool, now: float) -> None:
        if assigned or self.told or now - self.since < WAITING_NOTICE_AFTER_S:
            return
        self.told = True
        log.info(
            "no partitions of %s assigned yet: group %s waits for members that left without leaving "
            "(a killed sink) until their session of %.0f s ends, then assigns them",
            self.settings.topics.fields,
            self.settings.sink.group_id,
            self.settings.kafka.session_timeout_s,
        )
