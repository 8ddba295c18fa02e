"""A record on its way out, and the one dead-letter builder: the workers' (a document they cannot
process) and the sinks' (a record they cannot store) dead letters are the same record."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import msgspec

from schemas.messages import DeadLetter, ErrorCode
from streams.kafka.inbound import Inbound
from streams.settings import TopicSettings

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: bytes | None
    value: bytes
    # Not sent: when the end-to-end latency metric starts counting once the write is acked: the
    # document's submitted_at, else the raw message's Kafka timestamp (every message has one).
    submitted_at: datetime | None = None
    raw_timestamp: datetime | None = None


def dead_letter(
    inbound: Inbound, code: ErrorCode, message: str, doc_id: str | None, topics: TopicSettings, worker_id: str
) -> Outgoing:
    """The message's original bytes, untouched, with why it went no further; keyed by its doc_id
    where one is known, else by its own key."""
    record = DeadLetter(
        error_code=code,
        message=message,
        doc_id=doc_id,
        original_key=inbound.key,
        original_value=inbound.value or b"",
        source_topic=inbound.topic,
        partition=inbound.partition,
        offset=inbound.offset,
        worker_id=worker_id,
        received_at=inbound.received_at,
    )
    key = doc_id.encode() if doc_id else inbound.key
    return Outgoing(topics.dead_letter, key, _encoder.encode(record), raw_timestamp=inbound.timestamp)
