"""A message as a consumer fetched it, before any decoding: the one type the workers, the pipeline
and the sink pass around, whichever client fetched it (confluent-kafka, Faust, a file read by
`seqstream extract`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message


@dataclass(frozen=True)
class Inbound:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    # The wall-clock time its batch was taken: when the records say the worker received it.
    received_at: datetime
    # `time.monotonic()` when the consumer handed the message over: its queue time runs from here to
    # the start of its batch.
    fetched_at: float
    # The broker's timestamp of the message (the producer's create time, or the log append time where
    # the topic says so); None where there is none (a file read by `seqstream extract`).
    timestamp: datetime | None = None

    @classmethod
    def of(cls, message: Message, received_at: datetime, fetched_at: float) -> Inbound:
        """A confluent-kafka message that carries no error."""
        kind, millis = message.timestamp()
        timestamp = datetime.fromtimestamp(millis / 1000, UTC) if kind != TIMESTAMP_NOT_AVAILABLE else None
        return cls(
            message.topic(),
            message.partition(),
            message.offset(),
            message.key(),
            message.value(),
            received_at,
            fetched_at,
            timestamp,
        )
