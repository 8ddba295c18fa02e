"""Where a consumer that commits by hand resumes: a batch's offsets, written once for both such consumers.

The exactly-once worker (streams/workers/transactional.py) commits a batch's offsets inside its
transaction; a sink (streams/sinks/consumer.py) stores them in its database and commits
them to the group for lag. Both follow the same three rules: a partition resumes one past the last
message of a batch that is done (`next_offsets`); a batch that is not done starts again from its
first message in each partition (`Checkpoint.rewind`); and only partitions the consumer still holds
are sought or committed, since a revoked one's new owner starts from the committed offset.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

log = logging.getLogger(__name__)


class Position(Protocol):
    """Where a fetched message came from: any message type of ours has these."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


def next_offsets(batch: Iterable[Position]) -> list[TopicPartition]:
    """The offsets to commit for a batch: one past the last message of each partition."""
    last: dict[tuple[str, int], int] = {}
    for message in batch:
        key = (message.topic, message.partition)
        last[key] = max(last.get(key, -1), message.offset)
    return [TopicPartition(topic, partition, offset + 1) for (topic, partition), offset in sorted(last.items())]


def first_offsets(batch: Iterable[Position]) -> list[TopicPartition]:
    """Where to rewind to when a batch is not done: its first message per partition."""
    first: dict[tuple[str, int], int] = {}
    for message in batch:
        key = (message.topic, message.partition)
        first[key] = min(first.get(key, message.offset), message.offset)
    return [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(first.items())]


class Checkpoint:
    """A consumer's partitions as its assign and revoke callbacks report them, and a batch's offsets
    rewound to or committed on them."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.assigned: set[tuple[str, int]] = set()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.assigned = {(tp.topic, tp.partition) for tp in partitions}

    def revoke(self, partitions: Iterable[TopicPartition]) -> None:
        self.assigned -= {(tp.topic, tp.partition) for tp in partitions}

    def holds(self, tp: TopicPartition) -> bool:
        return (tp.topic, tp.partition) in self.assigned

    def rewind(self, batch: Iterable[Position]) -> None:
        """Seek each held partition back to the batch's first message there: it is consumed again."""
        for tp in first_offsets(batch):
            if not self.holds(tp):
                continue  # revoked meanwhile: its new owner starts from the committed offset
            try:
                self.consumer.seek(tp)
            except KafkaException as exc:
                log.warning("could not rewind %s[%d]: %s", tp.topic, tp.partition, exc)

    def replace_consumer(
        self, error: KafkaError, new_consumer: Callable[[], Consumer], instance: str | None
    ) -> Consumer:
        """After a fatal consumer error: the old consumer closed, a new one (subscribed by
        `new_consumer`) under the same group instance id, which this checkpoint now follows.

        Static membership's failure mode: a broker away longer than the session (a restart) times
        the member out, and a request of its old member id that lands after it rejoined is refused
        as fenced by "another consumer with the same group.instance.id" (itself), which librdkafka
        makes fatal. The new one joins as that instance again and resumes where its owner says on
        assignment (the committed offsets, or a sink's database): what was polled and not done is
        consumed again, as after any rewind.
        """
        log.warning(
            "consumer failed fatally (%s); a new consumer rejoins as instance %s", error.str(), instance or "dynamic"
        )
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()
        self.assigned = set()
        self.consumer = new_consumer()
        return self.consumer

    def commit(self, offsets: Iterable[TopicPartition]) -> None:
        """Commit the offsets of held partitions to the group, without waiting (raises KafkaException)."""
        held = [tp for tp in offsets if self.holds(tp)]
        if held:
            self.consumer.commit(offsets=held, asynchronous=True)
