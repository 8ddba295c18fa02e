"""Exactly-once delivery on a real broker: `worker.delivery=exactly_once` (streams/workers/transactional.py).

The worker is SIGKILLed inside open transactions, their records already on the broker
(tests/slow_commit_worker.py holds each transaction open a moment and says so), and restarted
under the same transactional id. A read_committed reader must then see exactly one result record
per document: none lost, none duplicated. A read_uncommitted reader beside it must see the killed
transactions' records, the duplicates that read_committed kept out: without them the test would
not have shown anything. A transaction failing fatally keeps its batch's results and writes them
again with a new producer (tests/fatal_commit_worker.py). Prints a `RELIABILITY ...` line (run
with -s) that ops/RELIABILITY.md quotes.
"""

from __future__ import annotations

import random
import re
import sys
import time
from datetime import UTC, datetime

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from ops.stress.worker_process import (
    Accounting,
    OutputReader,
    WorkerProcess,
    isolated_settings,
    sample_messages,
)
from streams.kafka.acls import worker_acl_bindings
from streams.kafka.checkpoint import first_offsets, next_offsets
from streams.kafka.clients import produce_lines
from streams.kafka.inbound import Inbound
from streams.kafka.topics import create_topics
from streams.settings import load_settings, transactional_id
from tests import prepared_kill_worker as prepared_kill

pytestmark = pytest.mark.kafka

READY = "exactly-once worker ready"
OPEN = "transaction open"
COMMITTED = " committed in "
SLOW_COMMIT_WORKER = [sys.executable, "-m", "tests.slow_commit_worker", "worker"]
KILLS = 3
DOCUMENTS = 1000


def _inbound(partition: int, offset: int) -> Inbound:
    return Inbound("raw", partition, offset, None, b"{}", datetime.now(UTC), time.monotonic())


def test_a_batch_commits_one_past_its_last_offset_and_rewinds_to_its_first() -> None:
    batch = [_inbound(2, 7), _inbound(0, 40), _inbound(2, 5), _inbound(0, 41), _inbound(2, 6)]
    assert [(tp.partition, tp.offset) for tp in next_offsets(batch)] == [(0, 42), (2, 8)]
    assert [(tp.partition, tp.offset) for tp in first_offsets(batch)] == [(0, 40), (2, 5)]


def test_exactly_once_worker_is_granted_its_transactional_id_and_nothing_more() -> None:
    settings = load_settings({}, worker={"delivery": "exactly_once", "transactional_id": "slot-3"})
    extra = {(b.restype, b.name, b.operation) for b in worker_acl_bindings(settings, "User:w")} - {
        (b.restype, b.name, b.operation) for b in worker_acl_bindings(load_settings({}), "User:w")
    }
    assert extra == {(ResourceType.TRANSACTIONAL_ID, "slot-3", AclOperation.WRITE)}


def test_without_a_stable_id_the_grant_covers_every_id_of_the_app() -> None:
    # The default id ends in the worker's pid, unknown to the admin who grants the ACL.
    settings = load_settings({}, worker={"delivery": "exactly_once", "app_id": "extract"})
    granted = worker_acl_bindings(settings, "User:w")[-1]
    assert (granted.restype, granted.name, granted.resource_pattern_type) == (
        ResourceType.TRANSACTIONAL_ID,
        "extract-",
        ResourcePatternType.PREFIXED,
    )
    assert transactional_id(settings.worker).startswith(granted.name)


@pytest.fixture
def exactly_once(kafka_bootstrap, tiny_model_dir, tmp_path):
    settings, env = isolated_settings(
        kafka_bootstrap,
        tiny_model_dir,
        tmp_path / "data",
        model__max_new_tokens="8",
        batch__max_documents="16",
        kafka__session_timeout_s="10",
        worker__delivery="exactly_once",
        # One worker slot, restarted: the same id lets each start abort the killed one's transaction.
        worker__transactional_id="seqstream-test-slot-0",
    )
    create_topics(settings)
    committed, uncommitted = OutputReader(settings), OutputReader(settings, isolation="read_uncommitted")
    worker = WorkerProcess(env, tmp_path / "worker.log", SLOW_COMMIT_WORKER)
    yield settings, worker, committed, uncommitted
    worker.stop()
    committed.close()
    uncommitted.close()


@pytest.mark.timeout(900)
def test_sigkilled_exactly_once_worker_writes_every_document_once(exactly_once) -> None:
    settings, worker, committed, uncommitted = exactly_once
    t = settings.topics
    messages, ids = sample_messages(DOCUMENTS, seed=64)
    rng = random.Random(7)
    thresholds = sorted(rng.sample(range(100, DOCUMENTS - 200), KILLS))

    def answered(outputs) -> int:
        return len(set(outputs.doc_ids(t.fields, t.review, t.dead_letter)))

    worker.start()
    produce_lines(settings, t.raw, messages)
    left_at_kill: list[int] = []
    recovery_s: list[float] = []
    for threshold in thresholds:
        committed.read_until(lambda o, n=threshold: answered(o) >= n, timeout_s=300, worker=worker)
        worker.wait_for_log(OPEN, count=worker.log_count(OPEN) + 1, timeout_s=120)
        worker.kill()
        left_at_kill.append(len(ids) - answered(committed.outputs))
        restarted = time.monotonic()
        worker.start()
        worker.wait_for_log(READY, count=worker.starts, timeout_s=300)
        recovery_s.append(time.monotonic() - restarted)
    out = committed.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review, t.dead_letter)), 600, worker)
    out = committed.drain()  # late records, if any (there must be none), are counted too
    seen_uncommitted = uncommitted.read_until(lambda o: len(o.results(settings)) >= len(out.results(settings)), 60)
    seen_uncommitted = uncommitted.drain()

    accounting = Accounting.of(ids, out.results(settings))
    aborted = Accounting.of(ids, seen_uncommitted.results(settings)).duplicated
    accounting.report(
        "exactly-once-sigkill",
        kills=KILLS,
        left_at_kill=left_at_kill,
        restart_to_ready_s=[round(s, 1) for s in recovery_s],
        aborted_records_seen_by_read_uncommitted=aborted,
    )
    assert all(left > 0 for left in left_at_kill), left_at_kill
    assert aborted > 0, "no killed transaction's records reached the broker: read_committed was not tested"
    accounting.assert_complete()
    assert accounting.duplicated == 0, "a document has more than one committed result record"
    assert not out.records[t.dead_letter]


def test_broker_restarted_mid_run_exactly_once_worker_recovers_by_itself(exactly_once, kafka_broker) -> None:
    settings, worker, committed, _ = exactly_once
    t = settings.topics
    messages, ids = sample_messages(400, seed=65)

    def answered(outputs) -> int:
        return len(set(outputs.doc_ids(t.fields, t.review, t.dead_letter)))

    worker.start()
    produce_lines(settings, t.raw, messages)
    committed.read_until(lambda o: answered(o) >= 100, timeout_s=300, worker=worker)
    # Stopped inside a transaction: its records are out, its commit cannot happen until the broker is back.
    worker.wait_for_log(OPEN, count=worker.log_count(OPEN) + 1, timeout_s=120)
    kafka_broker.stop()
    stopped = time.monotonic()
    time.sleep(8)
    worker.assert_alive()
    commits_before = worker.log_count(COMMITTED)
    kafka_broker.start()
    restarted = time.monotonic()
    worker.wait_for_log(COMMITTED, count=commits_before + 1, timeout_s=300)
    recovered = time.monotonic()
    out = committed.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review, t.dead_letter)), 600, worker)
    out = committed.drain()

    accounting = Accounting.of(ids, out.results(settings))
    accounting.report(
        "exactly-once-broker-restart",
        broker_down_s=round(restarted - stopped, 1),
        broker_up_to_next_commit_s=round(recovered - restarted, 1),
        worker_starts=worker.starts,
    )
    worker.assert_alive()
    assert worker.starts == 1, "the worker was restarted: it did not recover by itself"
    accounting.assert_complete()
    assert accounting.duplicated == 0
    assert not out.records[t.dead_letter]


FATAL_COMMIT_WORKER = [sys.executable, "-m", "tests.fatal_commit_worker", "worker"]
STUCK_CALL_WORKER = [sys.executable, "-m", "tests.stuck_call_worker", "worker"]


def run_faulty_worker(exactly_once, command: list[str], log_name: str, seed: int) -> tuple[str, Accounting, int]:
    """120 documents through a worker with an injected transactional fault: its log, what reached
    the outputs, and how many documents went through the model."""
    settings, slow_worker, committed, _ = exactly_once
    t = settings.topics
    worker = WorkerProcess(slow_worker.env, slow_worker.log_path.with_name(log_name), command)
    messages, ids = sample_messages(120, seed=seed)
    try:
        worker.start()
        worker.wait_for_log(READY, timeout_s=300)
        produce_lines(settings, t.raw, messages)
        out = committed.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review, t.dead_letter)), 600, worker)
        out = committed.drain()
    finally:
        worker.stop()
    log = worker.log_path.read_text(errors="replace")
    seen_by_model = sum(int(n) for n in re.findall(r"model saw (\d+) documents", log))
    return log, Accounting.of(ids, out.results(settings)), seen_by_model


@pytest.mark.timeout(600)
def test_a_fatal_transaction_error_writes_the_kept_results_again_without_the_model(exactly_once) -> None:
    log, accounting, seen_by_model = run_faulty_worker(exactly_once, FATAL_COMMIT_WORKER, "fatal.log", seed=66)
    assert "injecting a fatal transactional error" in log and "writes the batch's results again" in log
    accounting.assert_complete()
    assert accounting.duplicated == 0
    assert seen_by_model == accounting.sent, f"{seen_by_model} documents through the model for {accounting.sent}"


@pytest.mark.timeout(600)
def test_a_hung_transactional_call_is_given_up_at_its_deadline_and_the_results_written_again(exactly_once) -> None:
    log, accounting, seen_by_model = run_faulty_worker(exactly_once, STUCK_CALL_WORKER, "stuck.log", seed=67)
    assert "send_offsets_to_transaction hangs now" in log
    given_up = "send_offsets_to_transaction did not return in" in log
    assert given_up and "writes the batch's results again" in log, log[-3000:]
    accounting.assert_complete()
    assert accounting.duplicated == 0
    assert seen_by_model == accounting.sent, f"{seen_by_model} documents through the model for {accounting.sent}"


@pytest.mark.timeout(900)
def test_killed_with_a_batch_prepared_ahead_every_document_is_written_once(exactly_once) -> None:
    """The worker polls and prepares batch t+1 while t decodes and commits; SIGKILLed with one
    prepared (tests/prepared_kill_worker.py), its offsets were never committed: the restarted worker
    consumes it again, and read_committed sees one result per document."""
    settings, slow_worker, committed, _ = exactly_once
    t = settings.topics
    worker = WorkerProcess(slow_worker.env, slow_worker.log_path.with_name("prepared.log"), prepared_kill.COMMAND)
    messages, ids = sample_messages(400, seed=69)

    def answered(outputs) -> int:
        return len(set(outputs.doc_ids(t.fields, t.review, t.dead_letter)))

    worker.start()
    produce_lines(settings, t.raw, messages)
    try:
        left_at_kill = prepared_kill.kill_twice_with_a_batch_prepared(worker, committed, answered, len(ids))
        out = committed.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review, t.dead_letter)), 600, worker)
        out = committed.drain()
    finally:
        worker.stop()
    accounting = Accounting.of(ids, out.results(settings))
    accounting.report(
        "exactly-once-sigkill-between-prepare-and-decode",
        left_at_kill=left_at_kill,
    )
    assert all(left > 0 for left in left_at_kill), left_at_kill
    accounting.assert_complete()
    assert accounting.duplicated == 0, "a document has more than one committed result record"
