"""Kafka Connect, run: a Connect worker from Maven jars with ops/connect/jdbc-sink.json (Debezium's JDBC
sink) moves a fields topic into PostgreSQL beside `seqstream sink postgres`, and the README's BI
queries return the same rows from either.

The records are the sink tests' (contracts, an update of one, a job ad with a salary). Tombstones are
not on this topic: the connector drops them (README, "The alternative: Kafka Connect"), which the
last test shows.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from ops.connect.worker import TABLE, ConnectWorker, connector, tables_ddl
from ops.postgres import PostgresServer
from streams.settings import Settings
from streams.sinks.consumer import SinkConsumer
from streams.sinks.postgres import PostgresSink
from tests.readme_blocks import blocks, sql_statements
from tests.test_sink_postgres import end_offsets, field_record, job_ad_record, produce, sink_env, stored_offsets

pytestmark = pytest.mark.kafka

__all__ = ["sink_env"]  # the sink tests' fixture: topics, a group and a schema of this test's own

RECORDS = [
    (b"a", field_record("a", 1, amount="100")),
    (b"c", field_record("c", 1, party="北京天成科技有限公司")),
    (b"j", job_ad_record("j")),
    (b"a", field_record("a", 2, amount="250")),
]


def _query(dsn: str, schema: str, statement: str) -> list[tuple]:
    with psycopg.connect(dsn, options=f"-c search_path={schema}") as conn:
        return conn.execute(statement).fetchall()


@pytest.fixture
def both_sinks(
    sink_env, postgres_server: PostgresServer, tmp_path: Path
) -> Iterator[tuple[Settings, str, ConnectWorker]]:
    """The native sink (in this process) and the connector, each into a schema of its own."""
    settings, _ = sink_env
    schema = f"connect_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(tables_ddl(schema))
    jdbc = f"jdbc:postgresql://127.0.0.1:{postgres_server.port}/postgres?stringtype=unspecified&currentSchema={schema}"
    config = connector(
        settings.topics.fields,
        jdbc,
        "postgres",
        "",
        # One broker here: the connector's dead-letter topic with one copy. The table named with its
        # schema: without, Debezium took another test's doc_fields_connect (first found in the catalog).
        **{"errors.deadletterqueue.topic.replication.factor": "1", "collection.name.format": f"{schema}.{TABLE}"},
    )
    config["name"] = f"fields-{schema}"
    worker = ConnectWorker(tmp_path, settings.kafka.bootstrap_servers, config)
    native = SinkConsumer(settings, PostgresSink(settings))
    stop = threading.Event()
    thread = threading.Thread(target=native.run, args=(stop,), daemon=True)
    thread.start()
    try:
        worker.start()
        yield settings, schema, worker
    finally:
        stop.set()
        thread.join(30)
        worker.stop()


def _wait(done, what: str | Callable[[], str], worker: ConnectWorker, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            errors = [line for line in worker.log_path.read_text().splitlines() if " ERROR " in line or "WARN" in line]
            said = what() if callable(what) else what
            raise AssertionError(f"timed out waiting for {said}\n" + "\n".join(errors[-15:]))
        assert worker.task_state() == "RUNNING", f"the connector's task is {worker.task_state()}\n{worker.log_tail()}"
        time.sleep(0.5)


def test_connect_and_the_native_sink_answer_the_bi_queries_alike(both_sinks) -> None:
    settings, schema, worker = both_sinks
    dsn, native = settings.sink.dsn, settings.sink.db_schema
    produce(settings, RECORDS)
    rows = "SELECT doc_id, record->'metadata'->>'version' FROM doc_fields ORDER BY 1"
    expected = [("a", "2"), ("c", "1"), ("j", "1")]
    _wait(lambda: _query(dsn, schema, rows) == expected, "the connector's rows", worker)
    _wait(lambda: stored_offsets(settings) == end_offsets(settings), "the native sink's rows", worker)
    assert _query(dsn, native, rows) == expected

    [block] = blocks("**BI queries**", "sql")
    for statement in sql_statements(block):
        from_connect, from_native = _query(dsn, schema, statement), _query(dsn, native, statement)
        assert from_connect == from_native, statement
        assert from_connect, f"no rows: {statement}"


def test_the_connector_leaves_a_tombstone_s_row_where_the_native_sink_deletes_it(both_sinks) -> None:
    settings, schema, worker = both_sinks
    dsn, native = settings.sink.dsn, settings.sink.db_schema
    produce(settings, [*RECORDS, (b"c", None), (b"z", field_record("z"))])
    ids = "SELECT doc_id FROM doc_fields ORDER BY 1"
    _wait(
        lambda: _query(dsn, schema, ids) == [("a",), ("c",), ("j",), ("z",)],
        lambda: f"the connector's rows, {_query(dsn, schema, ids)} so far",
        worker,
    )
    _wait(lambda: stored_offsets(settings) == end_offsets(settings), "the native sink's rows", worker)
    # What README says: Debezium's sink takes a tombstone only without a value schema, which
    # StringConverter always gives; the config drops tombstones rather than stopping on them.
    assert _query(dsn, native, ids) == [("a",), ("j",), ("z",)]
