"""`seqstream sink postgres`: the fields topic as PostgreSQL tables a BI tool can query.

BI tools read SQL, not Kafka. The sink keeps one row per document (`doc_fields`, the latest record
of each `doc_id`, as the compacted topic does) and a view that unnests each record's spans into one
row per value (`field_values`); the tables are in streams/sinks/postgres_sql.py, what a poll asks
of them in postgres_plan.py (pure), the consumer around it in consumer.py (the same for every sink).

Exactly-once effect without Kafka transactions: each poll's rows and the next offset of every
partition it read commit in ONE database transaction (`sink_offsets`). On assignment the sink
resumes from the offsets the database holds, so a sink killed at any moment redoes exactly what its
rolled-back transaction held, and nothing it committed. Each transaction first locks its partitions'
`sink_offsets` rows and skips what they say is done, so a sink that lost its partitions mid-poll (a
zombie) cannot apply a record twice or undo a newer one.

A record replaces a row only with a higher offset; a tombstone (a key with no value) deletes it.
A message that is no field record goes to the dead-letter topic (`invalid_record`, with the reason)
before its offset is stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import psycopg
from confluent_kafka import TopicPartition
from psycopg import sql

from streams import metrics
from streams.kafka.inbound import Inbound
from streams.settings import Settings
from streams.sinks.base import DeadLetters, Sink
from streams.sinks.postgres_plan import Rejected, Upsert, columns, plan_batch
from streams.sinks.postgres_sql import (
    DELETE,
    FIELD_VALUES_VIEW,
    LOCK_OFFSETS,
    NEWEST_VIEW_COLUMN,
    SCHEMA_DDL,
    SEED_OFFSETS,
    STORE_OFFSETS,
    TABLES,
    UPSERT,
)

# Taken by every sink creating the tables at once: CREATE ... IF NOT EXISTS is not safe concurrently.
_DDL_LOCK = 0x5E05_7EA3
# What PostgreSQL says about one record's value, never about the connection: jsonb refusing U+0000
# (class 22), an index entry too long for a doc_id (54000). Retrying would fail forever.
_REFUSED = (psycopg.DataError, psycopg.errors.ProgramLimitExceeded)


class PostgresSink(Sink):
    """The fields topic's records as rows (see the module doc)."""

    name = "postgres"
    retriable = (psycopg.OperationalError, psycopg.InterfaceError)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.destination = f"schema {settings.sink.db_schema}"
        self.schema = sql.Identifier(settings.sink.db_schema)
        self.dead_letters = DeadLetters(settings)
        self.conn: psycopg.Connection | None = None
        # The poll's transaction between write and flush, and what it will store and reject.
        self._transaction = contextlib.ExitStack()
        self._rejected: list[Rejected] = []
        self._fresh = 0
        self.applied = 0

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(schema=self.schema)

    def connection(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg.connect(self.settings.sink.dsn, autocommit=True, application_name="seqstream-sink")
        return self.conn

    def setup(self) -> None:
        self.create_tables()

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
                return
            # A view made by an older sink lacks the newest columns (low, high, period): CREATE OR
            # REPLACE VIEW adds them at its end, as the view's owner may.
            [(current,)] = conn.execute(
                "SELECT count(*) FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = 'field_values' AND column_name = %s",
                (self.settings.sink.db_schema, NEWEST_VIEW_COLUMN),
            )
            if not current:
                conn.execute(self._sql(FIELD_VALUES_VIEW))

    def resume_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """The database's next offset of each partition; a partition it has not seen starts a row at 0
        (so that LOCK_OFFSETS always has a row to lock)."""
        conn = self.connection()
        topics, parts = [topic] * len(partitions), list(partitions)
        with conn.transaction():
            conn.execute(self._sql(SEED_OFFSETS), (topics, parts, [0] * len(parts)))
            rows = conn.execute(self._sql(LOCK_OFFSETS), (topics, parts)).fetchall()
        return {part: offset for _, part, offset in rows}

    def write(self, batch: Sequence[Inbound]) -> None:
        """In a transaction left open for `flush`: the partitions' offset rows locked, what they say is
        done skipped, the rest upserted and deleted."""
        conn = self.connection()
        self._transaction.enter_context(conn.transaction())
        keys = sorted({(m.topic, m.partition) for m in batch})
        topics, parts = [t for t, _ in keys], [p for _, p in keys]
        done = {(t, p): o for t, p, o in conn.execute(self._sql(LOCK_OFFSETS), (topics, parts)).fetchall()}
        fresh = [m for m in batch if m.offset >= done.get((m.topic, m.partition), 0)]
        plan = plan_batch(fresh)
        self._rejected = plan.rejected + self._upsert(conn, plan.upserts)
        if plan.deletes:
            conn.execute(self._sql(DELETE), ([d.doc_id for d in plan.deletes], [d.source.offset for d in plan.deletes]))
        self._fresh = len(fresh)

    def flush(self, offsets: Sequence[TopicPartition]) -> None:
        """The offsets stored and the dead letters acknowledged, then the transaction committed. A crash
        between the two repeats a dead letter (find it by source_topic/partition/offset), never loses one."""
        conn = self.connection()
        conn.execute(
            self._sql(STORE_OFFSETS),
            ([tp.topic for tp in offsets], [tp.partition for tp in offsets], [tp.offset for tp in offsets]),
        )
        self.dead_letters.send([(r.source, r.reason, r.doc_id) for r in self._rejected])
        self._transaction.close()  # commits
        self.applied += self._fresh
        metrics.SINK_APPLIED.inc(self._fresh)

    def abort(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self._transaction.__exit__(RuntimeError, RuntimeError("aborted"), None)  # rolls back
        self._transaction = contextlib.ExitStack()
        # The connection may be the cause: the next poll opens a new one.
        self._discard_connection()

    def close(self) -> None:
        self.dead_letters.close()
        self._discard_connection()

    def _upsert(self, conn: psycopg.Connection, upserts: list[Upsert]) -> list[Rejected]:
        """The rows in one statement; if PostgreSQL refuses a value (jsonb holds no U+0000), row by
        row, so that only the record it cannot store is rejected. Returns those."""
        if not upserts:
            return []
        try:
            with conn.transaction():
                conn.execute(self._sql(UPSERT), columns(upserts))
            return []
        except _REFUSED:
            pass
        rejected = []
        for row in upserts:
            try:
                with conn.transaction():
                    conn.execute(self._sql(UPSERT), columns([row]))
            except _REFUSED as exc:
                rejected.append(Rejected(f"PostgreSQL cannot store the record: {exc}", row.source, row.doc_id))
        return rejected

    def _discard_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
