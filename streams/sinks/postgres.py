"""`seqstream sink postgres`: the fields topic as PostgreSQL tables a BI tool can query.

BI tools read SQL, not Kafka. The sink keeps one row per document (`doc_fields`, the latest record
of each `doc_id`, as the compacted topic does) and a view that unnests each record's spans into one
row per value (`field_values`).

Exactly-once effect without Kafka transactions: each poll's rows and the next offset of every
partition it read commit in ONE database transaction (`sink_offsets`). On assignment the sink
seeks to the offsets the database holds, so a sink killed at any moment redoes exactly what its
rolled-back transaction held, and nothing it committed. The consumer group's Kafka offsets are
committed only after the database commit, for lag monitoring; they are never read back.
Each transaction first locks its partitions' `sink_offsets` rows and skips what they say is done,
so a sink that lost its partitions mid-poll (a zombie) cannot apply a record twice or undo a newer one.

A record replaces a row only with a higher offset; a tombstone (a key with no value) deletes it.
A message that is no field record goes to the dead-letter topic (`invalid_record`, with the reason)
before its offset is stored: never a crash, never silently gone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import psycopg
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from psycopg import sql

from schemas.messages import SCHEMA_VERSION, DeadLetter, ErrorCode, FieldRecord
from streams import metrics
from streams.kafka.checkpoint import Checkpoint, next_offsets
from streams.kafka.clients import client_config, fatal_error, polled_messages
from streams.kafka.inbound import Inbound
from streams.kafka.membership import membership
from streams.settings import Settings

log = logging.getLogger(__name__)

_record_decoder = msgspec.json.Decoder(FieldRecord)
_encoder = msgspec.json.Encoder()
# Taken by every sink creating the tables at once: CREATE ... IF NOT EXISTS is not safe concurrently.
_DDL_LOCK = 0x5E05_7EA3
DELIVERY_TIMEOUT_S = 30.0
# What PostgreSQL says about one record's value, never about the connection: jsonb refusing U+0000
# (class 22), an index entry too long for a doc_id (54000). Retrying would fail forever.
_REFUSED = (psycopg.DataError, psycopg.errors.ProgramLimitExceeded)
RETRY_PAUSE_MAX_S = 30.0
# A group join takes a second or two; past this, a sink with no partitions says what it waits for.
WAITING_NOTICE_AFTER_S = 5.0

SCHEMA_DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.doc_fields (
    doc_id          text PRIMARY KEY,
    record          jsonb NOT NULL,       -- the FieldRecord as the worker wrote it
    kafka_topic     text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset    bigint NOT NULL,      -- a record replaces this row only with a higher offset
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}.sink_offsets (
    kafka_topic     text NOT NULL,
    kafka_partition integer NOT NULL,
    next_offset     bigint NOT NULL,      -- where the sink resumes: written with the rows it covers
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kafka_topic, kafka_partition)
);
CREATE OR REPLACE VIEW {schema}.field_values AS
SELECT d.doc_id,
       f.label,
       s.span ->> 'text'                              AS value,
       s.span -> 'normalised' ->> 'value'             AS normalised,
       s.span -> 'normalised' ->> 'kind'              AS normalised_kind,
       (s.span ->> 'confidence')::double precision    AS confidence,
       (s.span ->> 'start')::integer                  AS span_start,
       (s.span ->> 'end')::integer                    AS span_end,
       -- the rest of the normal form: a range's end, what an amount is per, its currency; and the
       -- whole of it as jsonb, so a part added to Normalised later is not lost on the way to BI.
       -- Appended after the first columns: CREATE OR REPLACE VIEW may add columns only at the end.
       s.span -> 'normalised' ->> 'end'               AS normalised_end,
       s.span -> 'normalised' ->> 'unit'              AS normalised_unit,
       s.span -> 'normalised' ->> 'currency'          AS normalised_currency,
       s.span -> 'normalised'                         AS normalised_json
FROM {schema}.doc_fields AS d
CROSS JOIN LATERAL jsonb_each(d.record -> 'fields') AS f(label, spans)
CROSS JOIN LATERAL jsonb_array_elements(f.spans) AS s(span);
"""

TABLES = ("doc_fields", "sink_offsets", "field_values")

UPSERT = """
INSERT INTO {schema}.doc_fields AS d (doc_id, record, kafka_topic, kafka_partition, kafka_offset)
SELECT u.doc_id, u.record::jsonb, u.topic, u.part, u.off
FROM unnest(%s::text[], %s::text[], %s::text[], %s::integer[], %s::bigint[]) AS u(doc_id, record, topic, part, off)
ON CONFLICT (doc_id) DO UPDATE
SET record = EXCLUDED.record, kafka_topic = EXCLUDED.kafka_topic, kafka_partition = EXCLUDED.kafka_partition,
    kafka_offset = EXCLUDED.kafka_offset, updated_at = now()
WHERE d.kafka_offset < EXCLUDED.kafka_offset
"""

DELETE = """
DELETE FROM {schema}.doc_fields AS d
USING unnest(%s::text[], %s::bigint[]) AS t(doc_id, off)
WHERE d.doc_id = t.doc_id AND d.kafka_offset < t.off
"""

# Each transaction first locks its partitions' rows: two sinks that both think they own a
# partition (one evicted but still running) take turns, and the second skips what the first did.
LOCK_OFFSETS = """
SELECT o.kafka_topic, o.kafka_partition, o.next_offset
FROM {schema}.sink_offsets AS o
JOIN unnest(%s::text[], %s::integer[]) AS p(topic, part) ON o.kafka_topic = p.topic AND o.kafka_partition = p.part
FOR UPDATE OF o
"""

STORE_OFFSETS = """
INSERT INTO {schema}.sink_offsets AS o (kafka_topic, kafka_partition, next_offset)
SELECT * FROM unnest(%s::text[], %s::integer[], %s::bigint[])
ON CONFLICT (kafka_topic, kafka_partition) DO UPDATE
SET next_offset = GREATEST(o.next_offset, EXCLUDED.next_offset), updated_at = now()
"""

# A partition's row exists from its first assignment on, so that LOCK_OFFSETS always has a row to lock.
SEED_OFFSETS = """
INSERT INTO {schema}.sink_offsets (kafka_topic, kafka_partition, next_offset)
SELECT * FROM unnest(%s::text[], %s::integer[], %s::bigint[])
ON CONFLICT (kafka_topic, kafka_partition) DO NOTHING
"""


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


class DeliveryFailed(Exception):
    """A dead letter the broker did not acknowledge: the poll must not be marked done."""


class FieldsSink:
    """Consumes the fields topic and keeps the PostgreSQL tables in step with it (see the module doc)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.schema = sql.Identifier(settings.sink.db_schema)
        self.topic = settings.topics.fields
        # Static membership: restarted, it takes its partitions back at once (streams/kafka/membership.py).
        self.membership = membership(settings.kafka.group_instance_id, settings.sink.group_id)
        self.consumer = self._new_consumer()
        self.dead_letters = Producer(
            {
                **client_config(settings),
                "enable.idempotence": True,
                "message.max.bytes": settings.topics.dead_letter_max_message_bytes,
            }
        )
        self.conn: psycopg.Connection | None = None
        self.checkpoint = Checkpoint(self.consumer)
        self.applied = 0

    def _new_consumer(self) -> Consumer:
        return Consumer(
            {
                **client_config(self.settings),
                **self.membership.consumer_config(),
                "group.id": self.settings.sink.group_id,
                "enable.auto.commit": False,
                # The offsets we start from come from the database; these only matter for partitions
                # it has never seen (and offsets compacted or expired away).
                "auto.offset.reset": "earliest",
                # An exactly-once worker's aborted batches must never become rows.
                "isolation.level": "read_committed",
                "session.timeout.ms": int(self.settings.kafka.session_timeout_s * 1000),
                "max.poll.interval.ms": int(self.settings.kafka.max_poll_interval_s * 1000),
            }
        )

    def _subscribe(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _replace_consumer(self, error: KafkaError) -> None:
        """After a fatal consumer error, a new consumer under the same group instance id.

        A broker away longer than the session times a static member out, and a request of its old
        member id landing after it rejoined is refused as fenced by "another consumer with the same
        group.instance.id" (itself): fatal to librdkafka. The new one joins as that instance again;
        where it resumes, the database says (on assignment), as always.
        """
        log.warning(
            "consumer failed fatally (%s); a new consumer rejoins as instance %s",
            error.str(),
            self.membership.instance_id or "dynamic",
        )
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()
        self.consumer = self._new_consumer()
        self.checkpoint = Checkpoint(self.consumer)
        self._subscribe()

    # -- the database

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(schema=self.schema)

    def connection(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg.connect(self.settings.sink.dsn, autocommit=True, application_name="seqstream-sink")
        return self.conn

    def create_tables(self) -> None:
        """The tables and the view, unless all are there: then the sink needs no CREATE privilege,
        only SELECT, INSERT, UPDATE and DELETE on tables a DBA may have made from SCHEMA_DDL."""
        conn = self.connection()
        names = [sql.Identifier(self.settings.sink.db_schema, t).as_string(conn) for t in TABLES]
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
            [(missing,)] = conn.execute(
                "SELECT count(*) FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NULL", (names,)
            )
            if missing:
                conn.execute(self._sql(SCHEMA_DDL))

    def stored_offsets(self, partitions: Sequence[int]) -> dict[int, int]:
        """The database's next offset of each partition; a partition it has not seen starts a row at 0."""
        conn = self.connection()
        topics, parts = [self.topic] * len(partitions), list(partitions)
        with conn.transaction():
            conn.execute(self._sql(SEED_OFFSETS), (topics, parts, [0] * len(parts)))
            rows = conn.execute(self._sql(LOCK_OFFSETS), (topics, parts)).fetchall()
        return {part: offset for _, part, offset in rows}

    def apply(self, messages: Sequence[Inbound]) -> list[TopicPartition]:
        """One transaction: the rows, the dead letters' delivery, the next offsets. Returns those offsets."""
        conn = self.connection()
        resume = next_offsets(messages)
        topics, parts = [tp.topic for tp in resume], [tp.partition for tp in resume]
        with conn.transaction():
            done = {(t, p): o for t, p, o in conn.execute(self._sql(LOCK_OFFSETS), (topics, parts)).fetchall()}
            fresh = [m for m in messages if m.offset >= done.get((m.topic, m.partition), 0)]
            plan = plan_batch(fresh)
            rejected = plan.rejected + self._upsert(conn, plan.upserts)
            if plan.deletes:
                conn.execute(
                    self._sql(DELETE),
                    ([d.doc_id for d in plan.deletes], [d.source.offset for d in plan.deletes]),
                )
            conn.execute(self._sql(STORE_OFFSETS), (topics, parts, [tp.offset for tp in resume]))
            # Acknowledged before the commit: a crash between the two repeats a dead letter (find it
            # by source_topic/partition/offset), never loses one.
            self._send_dead_letters(rejected)
        self.applied += len(fresh)
        metrics.SINK_APPLIED.inc(len(fresh))
        return resume

    def _upsert(self, conn: psycopg.Connection, upserts: list[Upsert]) -> list[Rejected]:
        """The rows in one statement; if PostgreSQL refuses a value (jsonb holds no U+0000), row by
        row, so that only the record it cannot store is rejected. Returns those."""
        if not upserts:
            return []
        try:
            with conn.transaction():
                conn.execute(self._sql(UPSERT), _columns(upserts))
            return []
        except _REFUSED:
            pass
        rejected = []
        for row in upserts:
            try:
                with conn.transaction():
                    conn.execute(self._sql(UPSERT), _columns([row]))
            except _REFUSED as exc:
                rejected.append(Rejected(f"PostgreSQL cannot store the record: {exc}", row.source, row.doc_id))
        return rejected

    def _send_dead_letters(self, rejected: list[Rejected]) -> None:
        if not rejected:
            return
        failures: list[KafkaError] = []

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        now = datetime.now(UTC)
        for r in rejected:
            m = r.source
            record = DeadLetter(
                error_code=ErrorCode.INVALID_RECORD,
                message=r.reason,
                doc_id=r.doc_id,
                original_key=m.key,
                original_value=m.value or b"",
                source_topic=m.topic,
                partition=m.partition,
                offset=m.offset,
                worker_id=self.settings.worker.worker_id,
                received_at=now,
            )
            key = r.doc_id.encode() if r.doc_id else m.key
            self.dead_letters.produce(
                self.settings.topics.dead_letter, key=key, value=_encoder.encode(record), on_delivery=on_delivery
            )
            log.warning("dead letter for %s[%d]@%d: %s", m.topic, m.partition, m.offset, r.reason)
        left = self.dead_letters.flush(DELIVERY_TIMEOUT_S)
        if failures or left:
            raise DeliveryFailed(failures[0].str() if failures else f"{left} dead letters not acknowledged")

    # -- the loop

    def run(self, stop: threading.Event) -> None:
        """Until `stop` is set: finishes the poll in hand, then closes (static: its place in the group waits for it)."""
        self.create_tables()
        self._subscribe()
        log.info(
            "postgres sink ready: %s -> schema %s (group %s, instance %s)",
            self.topic,
            self.settings.sink.db_schema,
            self.settings.sink.group_id,
            self.membership.instance_id or "dynamic",
        )
        pause = 0.5
        waiting = WaitingForPartitions(self.settings, time.monotonic())
        try:
            while not stop.is_set():
                messages = self._poll()
                waiting.check(bool(self.checkpoint.assigned), time.monotonic())
                if not messages:
                    continue
                try:
                    resume = self.apply(messages)
                except (psycopg.OperationalError, psycopg.InterfaceError, DeliveryFailed, KafkaException) as exc:
                    # The transaction rolled back (or never began): the same messages again, later.
                    log.warning("poll not applied (%s); retrying in %.1f s", exc, pause)
                    self._discard_connection()
                    self.checkpoint.rewind(messages)
                    stop.wait(pause)
                    pause = min(pause * 2, RETRY_PAUSE_MAX_S)
                    continue
                pause = 0.5
                self._commit_for_lag(resume)
                log.debug("applied %d messages", len(messages))
        finally:
            self.consumer.close()
            self.dead_letters.flush(DELIVERY_TIMEOUT_S)
            self._discard_connection()
            self.membership.release()
            log.info("postgres sink stopped after %d messages applied", self.applied)

    def _poll(self) -> list[Inbound]:
        polled = self.consumer.consume(self.settings.sink.max_records, timeout=self.settings.sink.poll_timeout_s)
        if (fatal := fatal_error(polled)) is not None:
            self._replace_consumer(fatal)
            return []
        received_at, fetched_at = datetime.now(UTC), time.monotonic()
        return [
            Inbound.of(m, received_at, fetched_at)
            for m in polled_messages(polled, lambda error: log.warning("consumer: %s", error.str()))
        ]

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The database, not the group's commits, says where each partition resumes.
        stored = self.stored_offsets([tp.partition for tp in partitions])
        for tp in partitions:
            tp.offset = stored[tp.partition]
        consumer.assign(partitions)
        self.checkpoint.assign(partitions)
        log.info("assigned %s from the database's offsets %s", self.topic, dict(sorted(stored.items())))

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Nothing in flight: each poll commits before the next, where rebalances happen.
        self.checkpoint.revoke(partitions)

    def _commit_for_lag(self, resume: list[TopicPartition]) -> None:
        try:
            self.checkpoint.commit(resume)
        except KafkaException as exc:  # lag monitoring only: the database holds the real offsets
            log.debug("lag commit failed: %s", exc)

    def _discard_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


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


def _columns(upserts: Sequence[Upsert]) -> tuple[list, ...]:
    return (
        [u.doc_id for u in upserts],
        [u.record_json for u in upserts],
        [u.source.topic for u in upserts],
        [u.source.partition for u in upserts],
        [u.source.offset for u in upserts],
    )
