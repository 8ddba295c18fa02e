"""What a poll of the fields topic asks of the tables, decided without a database: pure, so the rules
(the latest offset per doc_id wins, a tombstone deletes, anything else is rejected with its reason)
are tested without a server."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

from schemas.messages import SCHEMA_VERSION, FieldRecord
from streams.kafka.inbound import Inbound

_record_decoder = msgspec.json.Decoder(FieldRecord)


@dataclass(frozen=True)
class Upsert:
    doc_id: str
    record_json: str
    source: Inbound


@dataclass(frozen=True)
class Delete:
    doc_id: str
    source: Inbound


@dataclass(frozen=True)
class Rejected:
    reason: str
    source: Inbound
    doc_id: str | None = None


Action = Upsert | Delete | Rejected


def classify(message: Inbound) -> Action:
    """What one fields-topic message asks of the table."""
    if message.value is None:
        if not message.key:
            return Rejected("a tombstone without a key: no row to delete", message)
        try:
            return Delete(message.key.decode("utf-8"), message)
        except UnicodeDecodeError:
            return Rejected("a tombstone whose key is not UTF-8", message)
    try:
        record = _record_decoder.decode(message.value)
    except (msgspec.DecodeError, RecursionError) as exc:
        # The path in msgspec's text (`... - at $.fields`) says where the record broke the contract.
        return Rejected(f"not a field record: {exc}", message)
    if record.schema_version != SCHEMA_VERSION:
        return Rejected(
            f"schema_version {record.schema_version} is not supported (this sink reads {SCHEMA_VERSION})",
            message,
            record.doc_id,
        )
    if message.key is not None and message.key != record.doc_id.encode():
        # Compaction and tombstones go by the key: a row under another name could never be deleted.
        return Rejected(f"the key {message.key!r} is not the record's doc_id {record.doc_id!r}", message, record.doc_id)
    # Valid JSON, so valid UTF-8: the bytes go to jsonb as they are, nothing re-encoded.
    return Upsert(record.doc_id, message.value.decode("utf-8"), message)


@dataclass
class Plan:
    upserts: list[Upsert]
    deletes: list[Delete]
    rejected: list[Rejected]


def plan_batch(messages: Iterable[Inbound]) -> Plan:
    """One action per doc_id, the highest offset's: a statement may touch each row only once."""
    latest: dict[str, Upsert | Delete] = {}
    rejected: list[Rejected] = []
    for message in messages:
        action = classify(message)
        if isinstance(action, Rejected):
            rejected.append(action)
            continue
        held = latest.get(action.doc_id)
        if held is None or held.source.offset < action.source.offset:
            latest[action.doc_id] = action
    actions = list(latest.values())
    return Plan(
        upserts=[a for a in actions if isinstance(a, Upsert)],
        deletes=[a for a in actions if isinstance(a, Delete)],
        rejected=rejected,
    )


def columns(upserts: Sequence[Upsert]) -> tuple[list, ...]:
    """UPSERT's arrays, one per column."""
    return (
        [u.doc_id for u in upserts],
        [u.record_json for u in upserts],
        [u.source.topic for u in upserts],
        [u.source.partition for u in upserts],
        [u.source.offset for u in upserts],
    )
