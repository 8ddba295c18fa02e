"""A measurement, not part of the suite: does Faust's `processing_guarantee="exactly_once"` hold
up for our agent when the worker is SIGKILLed at random moments? Run it on demand:

    ops/dev.sh test tests/probe_faust_exactly_once.py -s

It runs the at-least-once kill scenario of tests/test_faults.py with Faust's exactly-once switched
on (tests/faust_eos_worker.py), reads the outputs with read_committed, and prints one
`RELIABILITY faust-exactly-once ...` line: duplicates, losses, and whether the worker crashed or
stalled. ops/RELIABILITY.md quotes it; it is why `worker.delivery=exactly_once` uses
confluent-kafka's transactions (streams/workers/transactional.py) instead.
"""

from __future__ import annotations

import random
import sys
import time

import pytest

from ops.stress.worker_process import (
    Accounting,
    OutputReader,
    WorkerProcess,
    isolated_settings,
    sample_messages,
)
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics

pytestmark = pytest.mark.kafka

FAUST_EOS_WORKER = [sys.executable, "-m", "tests.faust_eos_worker", "worker"]
DOCUMENTS = 1000
KILLS = 3


@pytest.mark.timeout(1500)
def test_measure_faust_exactly_once_under_sigkill(kafka_bootstrap, tiny_model_dir, tmp_path) -> None:
    settings, env = isolated_settings(
        kafka_bootstrap,
        tiny_model_dir,
        tmp_path / "faust",
        model__max_new_tokens="8",
        batch__max_documents="16",
        kafka__session_timeout_s="10",
    )
    t = settings.topics
    create_topics(settings)
    reader = OutputReader(settings)
    worker = WorkerProcess(env, tmp_path / "worker.log", FAUST_EOS_WORKER)
    messages, ids = sample_messages(DOCUMENTS, seed=66)
    rng = random.Random(8)
    thresholds = sorted(rng.sample(range(100, DOCUMENTS - 200), KILLS))

    def answered(outputs) -> int:
        return len(set(outputs.doc_ids(t.fields, t.review, t.dead_letter)))

    outcome = "finished"
    kills = 0
    try:
        worker.start()
        produce_lines(settings, t.raw, messages)
        for threshold in thresholds:
            reader.read_until(lambda o, n=threshold: answered(o) >= n, timeout_s=300, worker=worker)
            time.sleep(rng.uniform(0.0, 1.5))
            worker.kill()
            kills += 1
            worker.start()
        reader.read_until(lambda o: ids <= set(o.doc_ids(t.fields, t.review, t.dead_letter)), 600, worker)
    except AssertionError as failure:  # the worker died or stopped answering: that is the finding
        outcome = "crashed" if "worker exited" in str(failure) else "stalled"
        print(worker.log_tail(40))
    finally:
        out = reader.drain()
        worker.stop()
        reader.close()

    accounting = Accounting.of(ids, out.results(settings))
    log = worker.log_path.read_text(errors="replace")
    accounting.report(
        "faust-exactly-once",
        kills=kills,
        outcome=outcome,
        tracebacks=log.count("Traceback"),
    )
    assert kills > 0 or outcome != "finished", "no kill landed: nothing was measured"
