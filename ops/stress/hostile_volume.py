"""Hostile input through a real broker and worker at volume: on demand, not in CI (minutes).

    python -m ops.stress.hostile_volume [--count 10000] [--seed 66] [--bootstrap HOST:PORT] [--out DIR]

The end-to-end test (tests/test_hostile_input.py) sends 320 seeded hostile messages; this sends
`--count` of the same eight kinds (ops/stress/hostile.py) to a `seqstream worker` on a tiny random
BLOOM (built here, 8 new tokens: the input handling is under test, not the model), and accounts
for every one: found in the dead-letter topic by its original bytes, or in fields/review by its
doc_id, none twice. It also reads the worker's log for tracebacks and its RSS before and after.
Without `--bootstrap` it starts a broker of its own (ops/kafka/launcher.py). ops/RELIABILITY.md
quotes the `RELIABILITY hostile-volume` line it prints; it exits 1 when a message is unaccounted.
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

LIMIT = 16 * 1024  # the end-to-end test's size limit, so that kind 4 reaches both sides of it


def run(count: int, seed: int, bootstrap: str | None, out: Path) -> int:
    from ops.demo.samples import sample_documents
    from ops.kafka.launcher import KafkaBroker
    from ops.stress.hostile import seeded_hostile_messages
    from ops.stress.worker_process import OutputReader, WorkerProcess, isolated_settings, report
    from ops.train.tiny import build_tiny_bloom
    from schemas.decode import salvage_doc_id
    from streams.kafka.clients import produce_lines
    from streams.kafka.topics import create_topics

    out.mkdir(parents=True, exist_ok=True)
    broker = None
    if bootstrap is None:
        broker = KafkaBroker(out / "kafka")
        bootstrap = broker.start()
    model_dir = build_tiny_bloom(out / "tiny-bloom", [raw["text"] for raw, _ in sample_documents(100, seed=1)], seed=0)
    settings, env = isolated_settings(
        bootstrap,
        model_dir,
        out / "faust",
        batch__max_document_bytes=str(LIMIT),
        batch__max_documents="32",
        model__max_new_tokens="8",
    )
    t = settings.topics
    create_topics(settings)
    messages = seeded_hostile_messages(count, seed=seed, limit=LIMIT)
    worker = WorkerProcess(env, out / "worker.log")
    reader = OutputReader(settings)
    try:
        worker.start()
        started = time.monotonic()
        produce_lines(settings, t.raw, messages)
        rss_start = worker.rss_bytes()
        outputs = reader.read_until(lambda o: len(o.results(settings)) >= len(messages), 3600, worker)
        elapsed = time.monotonic() - started
        outputs = reader.drain()
        rss_end = worker.rss_bytes()
        worker.assert_alive()
    finally:
        worker.stop()
        reader.close()
        if broker is not None:
            broker.stop()

    dead = Counter(base64.b64decode(r["original_value"]) for r in outputs.records[t.dead_letter])
    answered = Counter(r["doc_id"] for topic in (t.fields, t.review) for r in outputs.records[topic])
    unaccounted = [m for m in messages if not dead[m] and not answered[salvage_doc_id(m)]]
    twice = sum(dead.values()) + sum(answered.values()) - len(messages) + len(unaccounted)
    log = worker.log_path.read_text(errors="replace")
    report(
        "hostile-volume",
        sent=len(messages),
        dead_letters=sum(dead.values()),
        extracted=sum(answered.values()),
        unaccounted=len(unaccounted),
        answered_twice=twice,
        alerts=len(outputs.records[t.alerts]),
        seconds=round(elapsed, 1),
        worker_rss_mib=f"{rss_start / 2**20:.0f}->{rss_end / 2**20:.0f}",
        tracebacks=log.count("Traceback"),
        codes=dict(Counter(r["error_code"] for r in outputs.records[t.dead_letter]).most_common()),
    )
    return 1 if unaccounted or twice or "Traceback" in log else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.stress.hostile_volume", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=66)
    parser.add_argument("--bootstrap", help="an existing broker (default: start one)")
    parser.add_argument("--out", type=Path, help="broker data, model and worker log (default: a temporary dir)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="seqstream-hostile-"))
    print(f"working in {out}", file=sys.stderr)
    return run(args.count, args.seed, args.bootstrap, out)


if __name__ == "__main__":
    sys.exit(main())
