"""Kill -> first output on its partitions, with the default Kafka settings: what a restart costs.

    python -m ops.stress.restart [--bootstrap HOST:PORT] [--delivery at_least_once exactly_once]
                                 [--group-instance-id none]

Without `--bootstrap` it starts a three-broker cluster (ops/kafka/cluster.py) in a temporary folder
and creates the topics with 3 replicas and `min.insync.replicas` 2. For each delivery mode, a
worker with the default session (30 s) and membership (static, a slot of this host) reads a first
wave; it is SIGKILLed and started again at once, as a supervisor would, and a second wave is
published on every partition. Printed per mode: kill -> the restarted worker ready, and kill -> its
first record visible to a read_committed reader. `--group-instance-id none` measures dynamic
membership for comparison (the restarted worker then waits for the dead one's session).
The model is whatever the default resolves to (the shipped demo model offline), 24 new tokens.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from ops.kafka.cluster import KafkaCluster
from ops.stress.worker_process import OutputReader, WorkerProcess, isolated_settings, report, sample_messages
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics
from streams.settings import EngineSettings

READY = {"at_least_once": "[^Worker]: Ready", "exactly_once": "exactly-once worker ready"}
CLUSTER = {"topics__replication_factor": "3", "topics__min_insync_replicas": "2"}
WAVE = 60


def measure(bootstrap: str, delivery: str, instance_id: str, root: Path, overrides: dict[str, str]) -> dict:
    from model import resolve_model_path

    model_dir, _ = resolve_model_path(EngineSettings().path)
    root.mkdir(parents=True, exist_ok=True)
    settings, env = isolated_settings(
        bootstrap,
        Path(model_dir),
        root / "faust",
        worker__delivery=delivery,
        kafka__group_instance_id=instance_id,
        **overrides,
    )
    create_topics(settings)
    t = settings.topics
    reader = OutputReader(settings)
    worker = WorkerProcess({**env, "SEQSTREAM_WORKER__WORKER_ID": "life0"}, root / f"{delivery}.log")
    try:
        worker.start()
        worker.wait_for_log(READY[delivery], timeout_s=600)
        first, first_ids = sample_messages(WAVE, seed=91)
        produce_lines(settings, t.raw, first)
        reader.read_until(lambda o: first_ids <= set(o.doc_ids(t.fields, t.review, t.dead_letter)), 600, worker)
        worker.kill()
        killed, killed_wall = time.monotonic(), datetime.now(UTC)
        worker.env["SEQSTREAM_WORKER__WORKER_ID"] = "life1"
        worker.start()
        second, _ = sample_messages(WAVE, seed=92)
        produce_lines(settings, t.raw, second)
        worker.wait_for_log(READY[delivery], count=2, timeout_s=600)
        ready_s = time.monotonic() - killed

        def restarted_wrote(outputs) -> bool:
            return any(
                r["processing"]["worker_id"] == "life1"
                and datetime.fromisoformat(r["processing"]["completed_at"]) > killed_wall
                for r in outputs.results(settings)
            )

        reader.read_until(restarted_wrote, 600, worker)
        first_output_s = time.monotonic() - killed
    finally:
        worker.stop()
        reader.close()
    return {
        "delivery": delivery,
        "group_instance_id": instance_id or "slot",
        "session_timeout_s": settings.kafka.session_timeout_s,
        "kill_to_ready_s": round(ready_s, 1),
        "kill_to_first_output_s": round(first_output_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.stress.restart", description=__doc__)
    parser.add_argument("--bootstrap", help="an existing cluster (default: start three brokers here)")
    parser.add_argument("--delivery", nargs="+", default=["at_least_once", "exactly_once"])
    parser.add_argument("--group-instance-id", default="", help="'' = a slot of this host (default), 'none' = dynamic")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="seqstream-restart-")))
        bootstrap, overrides = args.bootstrap, {}
        if bootstrap is None:
            bootstrap = stack.enter_context(KafkaCluster(root / "cluster")).bootstrap_servers
            overrides = CLUSTER
        for delivery in args.delivery:
            report("restart", **measure(bootstrap, delivery, args.group_instance_id, root / delivery, overrides))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
