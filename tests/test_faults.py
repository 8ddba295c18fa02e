"""Faults on a real broker: killed workers, a restarted broker, a consumer group losing a member,
an engine that raises. Each test prints a `RELIABILITY ...` line (run with -s) that
ops/RELIABILITY.md quotes.

Sizes (2-core CPU, tiny BLOOM, 8 new tokens): the kill test sends 2,000 documents and kills the
worker 4 times; the broker test 600 documents; the group test 600; the poison test 62.
"""

from __future__ import annotations

import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec
import pytest

from ops.stress.worker_process import (
    Accounting,
    OutputReader,
    Outputs,
    WorkerProcess,
    isolated_settings,
    report,
    sample_messages,
)
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics
from streams.settings import Settings
from tests import prepared_kill_worker as prepared_kill

pytestmark = pytest.mark.kafka

# Eight new tokens: the faults, not the generation, are under test, and 2,000 documents must fit
# in minutes on a shared 2-core machine. A killed member holds its partitions until its session
# expires: 10 s (the broker's floor is 6 s) keeps a takeover short without making a slow batch
# look like a dead worker.
FAULT_OVERRIDES = {"model__max_new_tokens": "8", "batch__max_documents": "16", "kafka__session_timeout_s": "10"}
READY = "[^Worker]: Ready"
BATCH_DONE = "] batch of "


@pytest.fixture
def fault_env(kafka_bootstrap, tiny_model_dir, tmp_path):
    settings, env = isolated_settings(kafka_bootstrap, tiny_model_dir, tmp_path / "faust", **FAULT_OVERRIDES)
    create_topics(settings)
    reader = OutputReader(settings)
    workers: list[WorkerProcess] = []

    def new_worker(name: str = "worker", command: list[str] | None = None) -> WorkerProcess:
        worker_env = {
            **env,
            "SEQSTREAM_WORKER__WORKER_ID": name,
            "SEQSTREAM_WORKER__DATA_DIR": str(tmp_path / f"faust-{name}"),
        }
        worker = WorkerProcess(worker_env, tmp_path / f"{name}.log", command)
        workers.append(worker)
        return worker

    yield settings, reader, new_worker
    for worker in workers:
        worker.stop()
    reader.close()


def _results_seen(settings: Settings) -> Callable[[Outputs], int]:
    t = settings.topics
    return lambda outputs: len(set(outputs.doc_ids(t.fields, t.review)))


KILLS = 4


@pytest.mark.timeout(1200)
def test_worker_sigkilled_at_random_moments_loses_nothing(fault_env) -> None:
    settings, reader, new_worker = fault_env
    t = settings.topics
    messages, ids = sample_messages(2000, seed=61)
    seen = _results_seen(settings)
    rng = random.Random(6)
    # Kill points: after a seeded number of documents, then a seeded delay, so that a kill lands
    # anywhere in a batch (during generation, while writing, between write and ack/commit).
    thresholds = sorted(rng.sample(range(150, 1600), KILLS))

    worker = new_worker()
    worker.start()
    produce_lines(settings, t.raw, messages)
    left_at_kill: list[int] = []
    recovery_s: list[float] = []
    for life, threshold in enumerate(thresholds, start=1):
        reader.read_until(lambda o, n=threshold: seen(o) >= n, timeout_s=300, worker=worker)
        time.sleep(rng.uniform(0.0, 1.5))
        worker.kill()
        left_at_kill.append(len(ids) - seen(reader.outputs))
        # Each life writes its own worker_id, so the first record of the next one is unmistakable
        # (records the killed one wrote may still be on their way to the reader).
        worker.env["SEQSTREAM_WORKER__WORKER_ID"] = incarnation = f"worker-life{life}"
        restarted = time.monotonic()
        worker.start()
        reader.read_until(
            lambda o, me=incarnation: any(r["processing"]["worker_id"] == me for r in o.results(settings)),
            timeout_s=300,
            worker=worker,
        )
        recovery_s.append(time.monotonic() - restarted)
    out = reader.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review)), timeout_s=600, worker=worker)

    accounting = Accounting.of(ids, out.results(settings))
    accounting.report(
        "sigkill",
        differing=len(accounting.differing),
        kills=len(left_at_kill),
        left_at_kill=left_at_kill,
        restart_to_first_result_s=[round(s, 1) for s in recovery_s],
    )
    # Every kill must have landed while documents were still outstanding, or it tested nothing.
    assert all(left > 0 for left in left_at_kill), left_at_kill
    accounting.assert_complete()
    assert not out.records[t.dead_letter]


def test_broker_restarted_mid_run_worker_recovers_by_itself(fault_env, kafka_broker) -> None:
    settings, reader, new_worker = fault_env
    t = settings.topics
    messages, ids = sample_messages(600, seed=62)
    seen = _results_seen(settings)

    worker = new_worker()
    worker.start()
    produce_lines(settings, t.raw, messages)
    reader.read_until(lambda o: seen(o) >= 150, timeout_s=300, worker=worker)
    errors_before = worker.log_count("[ERROR]") + worker.log_count(" ERROR ")
    kafka_broker.stop()
    stopped = time.monotonic()
    time.sleep(8)  # longer than a batch, so that the worker meets the dead broker while writing
    worker.assert_alive()
    # No batch can finish while the broker is down (its outputs cannot be acknowledged), so the
    # next "batch of" line is the first batch the worker completed against the restarted broker.
    batches_before = worker.log_count(BATCH_DONE)
    kafka_broker.start()
    restarted = time.monotonic()
    worker.wait_for_log(BATCH_DONE, count=batches_before + 1, timeout_s=300)
    recovered = time.monotonic()
    # aiokafka inside Faust logs each failed connection and fetch (every ~100 ms): one line per cause a minute.
    outage_errors = worker.log_count("[ERROR]") + worker.log_count(" ERROR ") - errors_before
    out = reader.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review)), timeout_s=600, worker=worker)

    accounting = Accounting.of(ids, out.results(settings))
    accounting.report(
        "broker-restart",
        broker_down_s=round(restarted - stopped, 1),
        broker_up_to_first_result_s=round(recovered - restarted, 1),
        worker_starts=worker.starts,
        outage_error_lines=outage_errors,
    )
    worker.assert_alive()
    assert worker.starts == 1, "the worker was restarted: it did not recover by itself"
    assert outage_errors <= 10, worker.log_path.read_text(errors="replace")[-4000:]
    accounting.assert_complete()
    assert not out.records[t.dead_letter]


def test_two_workers_split_partitions_and_the_survivor_finishes(fault_env) -> None:
    settings, reader, new_worker = fault_env
    t = settings.topics
    messages, ids = sample_messages(600, seed=63)
    a, b = new_worker("worker-a"), new_worker("worker-b")
    a.start()
    b.start()
    a.wait_for_log(READY)
    b.wait_for_log(READY)
    # The split is read from the records, which say who processed which partition.
    produce_lines(settings, t.raw, messages)

    def by_worker(outputs) -> dict[str, set[int]]:
        parts: dict[str, set[int]] = defaultdict(set)
        for topic in (t.fields, t.review):
            for record in outputs.records[topic]:
                parts[record["processing"]["worker_id"]].add(record["processing"]["partition"])
        return parts

    every_partition = set(range(settings.topics.partitions))

    def both_at_work(outputs) -> bool:
        parts = by_worker(outputs)
        return len(parts) == 2 and set().union(*parts.values()) == every_partition

    reader.read_until(both_at_work, timeout_s=300, worker=a)
    split = by_worker(reader.outputs)
    a.kill()
    killed, killed_wall = time.monotonic(), datetime.now(UTC)
    before = {id(r) for topic in (t.fields, t.review) for r in reader.outputs.records[topic]}
    # a may have finished its partitions before it died (on a quiet machine it does): documents
    # published after the kill land on every partition, so b must serve a's as well to finish.
    later, later_ids = sample_messages(120, seed=64)
    produce_lines(settings, t.raw, later)
    ids = ids | later_ids
    out = reader.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review)), timeout_s=600, worker=b)

    after_kill = [r for topic in (t.fields, t.review) for r in out.records[topic] if id(r) not in before]
    taken_over = {r["processing"]["partition"] for r in after_kill if r["processing"]["worker_id"] == "worker-b"}
    first_of_a = [
        datetime.fromisoformat(r["processing"]["completed_at"])
        for r in after_kill
        if r["processing"]["worker_id"] == "worker-b" and r["processing"]["partition"] in split["worker-a"]
    ]
    accounting = Accounting.of(ids, out.results(settings))
    accounting.report(
        "consumer-group",
        partitions_before_kill={k: sorted(v) for k, v in sorted(split.items())},
        partitions_b_after_kill=sorted(taken_over),
        kill_to_first_record_of_b_on_a_partition_s=round((min(first_of_a) - killed_wall).total_seconds(), 1)
        if first_of_a
        else None,
        kill_to_finish_s=round(time.monotonic() - killed, 1),
    )
    assert set(split) == {"worker-a", "worker-b"} and all(split.values())
    assert split["worker-a"] | split["worker-b"] == every_partition
    # Both were Ready (assigned) before the first document was published: no partition moved.
    assert not split["worker-a"] & split["worker-b"], split
    assert split["worker-a"] - split["worker-b"] <= taken_over, "b did not take over a's partitions"
    assert first_of_a, "no record from b on a partition a held"
    accounting.assert_complete()


POISON_COMMAND = [sys.executable, "-m", "tests.poisoned_worker", "worker"]


def test_engine_raising_on_one_document_costs_only_that_document(fault_env) -> None:
    settings, reader, new_worker = fault_env
    t = settings.topics
    messages, ids = sample_messages(60, seed=64)
    poisoned = [
        msgspec.json.encode({"doc_id": f"doc-{i}-poison", "text": "某某文本", "labels": ["甲方"]}) for i in (1, 2)
    ]
    rng = random.Random(64)
    everything = messages + poisoned
    rng.shuffle(everything)

    worker = new_worker(command=POISON_COMMAND)
    worker.start()
    produce_lines(settings, t.raw, everything)
    out = reader.read_until(
        lambda o: ids <= set(o.doc_ids(t.fields, t.review)) and len(o.records[t.dead_letter]) >= len(poisoned),
        timeout_s=300,
        worker=worker,
    )

    dead = out.records[t.dead_letter]
    pipeline_alerts = [a for a in out.records[t.alerts] if a["kind"] == "pipeline"]
    accounting = Accounting.of(ids, [r for topic in (t.fields, t.review) for r in out.records[topic]])
    report(
        "engine-raises",
        sent=len(everything),
        good_received=accounting.received,
        dead_letters=len(dead),
        pipeline_alerts=len(pipeline_alerts),
        lost=len(accounting.lost),
    )
    assert sorted(d["doc_id"] for d in dead) == ["doc-1-poison", "doc-2-poison"]
    assert {d["error_code"] for d in dead} == {"processing_failed"}
    assert sorted(a["doc_id"] for a in pipeline_alerts) == ["doc-1-poison", "doc-2-poison"]
    accounting.assert_complete()
    worker.assert_alive()


@pytest.mark.timeout(900)
def test_worker_killed_between_prepare_and_decode_loses_nothing(fault_env) -> None:
    """The agent prepares batch t+1 while t decodes; killed with a batch prepared and not yet run,
    its events were never acknowledged: the restarted worker is delivered them again."""
    settings, reader, new_worker = fault_env
    t = settings.topics
    messages, ids = sample_messages(400, seed=68)
    seen = _results_seen(settings)
    worker = new_worker(command=prepared_kill.COMMAND)
    worker.start()
    produce_lines(settings, t.raw, messages)

    def new_life(life: int) -> None:
        worker.env["SEQSTREAM_WORKER__WORKER_ID"] = f"worker-life{life}"

    left_at_kill = prepared_kill.kill_twice_with_a_batch_prepared(worker, reader, seen, len(ids), new_life)
    out = reader.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review)), timeout_s=600, worker=worker)

    accounting = Accounting.of(ids, out.results(settings))
    accounting.report(
        "sigkill-between-prepare-and-decode",
        left_at_kill=left_at_kill,
    )
    assert all(left > 0 for left in left_at_kill), left_at_kill
    accounting.assert_complete()
    assert not out.records[t.dead_letter]
