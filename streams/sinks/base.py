"""What every sink is, in quix-streams' shape: `write(batch)` and `flush`, over the one Checkpoint.

A sink copies a topic into another system. Its consumer's lifecycle (polling, assignment, rewinds,
a replaced consumer) is streams/sinks/consumer.py's and the same for every sink; a sink says only
where each partition resumes, how a batch is written, and how it is made durable:

- `resume_offsets`: the next offset of each partition as the destination stored it. A sink that
  stores its offsets with its rows in one transaction is exactly-once in effect: killed at any
  moment, it redoes what its rolled-back transaction held and nothing it committed.
- `write(batch)`: the batch's effects, not yet durable (inside the destination's transaction).
- `flush(offsets)`: durable, together with the offsets the batch covers; `abort()` undoes a write
  that will not be flushed. The consumer then rewinds the batch and tries again after a pause.

A message the sink cannot store goes to the dead-letter topic through `DeadLetters` before its
offset is stored: never a crash, never silently gone.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from schemas.messages import ErrorCode
from streams.flow.outgoing import dead_letter
from streams.kafka.checkpoint import next_offsets
from streams.kafka.clients import client_config
from streams.kafka.inbound import Inbound
from streams.settings import Settings

log = logging.getLogger(__name__)

DELIVERY_TIMEOUT_S = 30.0


class Sink(ABC):
    # What the logs call it (`postgres sink ready: ...`), and where it writes, in words.
    name: str
    destination: str
    # Errors after which the same batch is tried again later (a connection lost, a broker away);
    # anything else ends the sink.
    retriable: tuple[type[Exception], ...] = ()

    @abstractmethod
    def setup(self) -> None:
        """Before the first batch: the destination's tables, say."""

    @abstractmethod
    def resume_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Where each partition resumes, as the destination stored it (0 for one it never saw)."""

    @abstractmethod
    def write(self, batch: Sequence[Inbound]) -> None:
        """The batch's effects in the destination, durable only once flushed."""

    @abstractmethod
    def flush(self, offsets: Sequence[TopicPartition]) -> None:
        """Make what was written durable with the offsets that follow it, all or nothing."""

    @abstractmethod
    def abort(self) -> None:
        """Undo what was written since the last flush."""

    @abstractmethod
    def close(self) -> None:
        """After the last batch."""

    def apply(self, batch: Sequence[Inbound]) -> list[TopicPartition]:
        """`write` then `flush` the batch, or `abort` it; returns the offsets it stored."""
        resume = next_offsets(batch)
        try:
            self.write(batch)
            self.flush(resume)
        except BaseException:
            self.abort()
            raise
        return resume


class DeliveryFailed(Exception):
    """A dead letter the broker did not acknowledge: the batch must not be marked done."""


class DeadLetters:
    """A sink's dead letters (`invalid_record`, with the reason), acknowledged before it goes on."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = Producer(
            {
                **client_config(settings),
                "enable.idempotence": True,
                "message.max.bytes": settings.topics.dead_letter_max_message_bytes,
            }
        )

    def send(self, rejected: Sequence[tuple[Inbound, str, str | None]]) -> None:
        """(message, reason, its doc_id where known) each; raises DeliveryFailed unless all are acknowledged."""
        if not rejected:
            return
        failures: list[KafkaError] = []

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        for m, reason, doc_id in rejected:
            o = dead_letter(
                m, ErrorCode.INVALID_RECORD, reason, doc_id, self.settings.topics, self.settings.worker.worker_id
            )
            self.producer.produce(o.topic, key=o.key, value=o.value, on_delivery=on_delivery)
            log.warning("dead letter for %s[%d]@%d: %s", m.topic, m.partition, m.offset, reason)
        left = self.producer.flush(DELIVERY_TIMEOUT_S)
        if failures or left:
            raise DeliveryFailed(failures[0].str() if failures else f"{left} dead letters not acknowledged")

    @abstractmethod
    def close(self) -> None:
        self.producer.flush(DELIVERY_TIMEOUT_S)
