"""A Kafka cluster on loopback for tests and local dev: one KRaft controller and N brokers.

    python -m ops.kafka.cluster run [--brokers 3] [--data-dir DIR]

Each node is a `KafkaBroker` process (ops/kafka/launcher.py) from the same Maven jars, with its own
ports and data dir. The controller (node id 0) is a node of its own rather than a role of the
brokers: with three combined broker+controller nodes, losing two brokers would also lose the
controller quorum, and nothing could then shrink an ISR or move a partition's leader. Production
KRaft clusters keep the two apart for the same reason. Tests kill brokers, never the controller.

With N > 1 the defaults are a production cluster's: internal topics (offsets, transaction state)
replicated min(N, 3) times with `min.insync.replicas` min(N, 2), and the same for topics created
without explicit settings.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from ops.kafka.launcher import HOST, KafkaBroker, _tcp_accepts, broker_properties, cache_root, new_cluster_id

CONTROLLER_ID = 0
# Four JVMs share the machine: a broker at test loads fits in 256 MiB, the controller in 128 MiB.
BROKER_HEAP_OPTS = "-Xms128m -Xmx256m"
CONTROLLER_HEAP_OPTS = "-Xms64m -Xmx128m"
# How often a broker looks for transactions older than their timeout and aborts them. Kafka's
# default (10 s) would add up to 10 s to the transaction timeout before read_committed readers
# see past a dead producer's open transaction; 1 s keeps that wait close to the timeout itself.
TIMED_OUT_TRANSACTION_CHECK_MS = 1000


def cluster_broker_properties(node: KafkaBroker, node_id: int, voters: str, brokers: int) -> dict[str, str]:
    """server.properties of broker `node_id` in a cluster of `brokers` brokers."""
    replicas, min_isr = str(min(brokers, 3)), str(min(brokers, 2))
    props = broker_properties(node.port, node.controller_port, node.data_dir)
    props.update(
        {
            "process.roles": "broker",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{HOST}:{node.port}",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(TIMED_OUT_TRANSACTION_CHECK_MS),
        }
    )
    props.update(node.extra_config)
    return props


def controller_properties(node: KafkaBroker) -> dict[str, str]:
    """server.properties of the controller-only node: its CONTROLLER listener and nothing else."""
    props = broker_properties(node.port, node.controller_port, node.data_dir)
    for broker_only in ("inter.broker.listener.name", "advertised.listeners"):
        del props[broker_only]
    props.update(
        {
            "process.roles": "controller",
            "node.id": str(CONTROLLER_ID),
            "controller.quorum.voters": f"{CONTROLLER_ID}@{HOST}:{node.controller_port}",
            "listeners": f"CONTROLLER://{HOST}:{node.controller_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        }
    )
    props.update(node.extra_config)
    return props


class ClusterBroker(KafkaBroker):
    """One broker of a KafkaCluster (broker role only, node id 1..N)."""

    def __init__(self, data_dir: Path, node_id: int, cluster: KafkaCluster) -> None:
        super().__init__(data_dir)
        self.node_id = node_id
        self._cluster = cluster
        self.cluster_id = cluster.cluster_id
        self.heap_opts = BROKER_HEAP_OPTS

    def properties(self) -> dict[str, str]:
        return cluster_broker_properties(self, self.node_id, self._cluster.voters, len(self._cluster.brokers))


class ClusterController(KafkaBroker):
    """The cluster's KRaft controller (controller role only, node id 0); it serves no clients."""

    def __init__(self, data_dir: Path, cluster_id: str) -> None:
        super().__init__(data_dir)
        self.cluster_id = cluster_id
        self.heap_opts = CONTROLLER_HEAP_OPTS

    def properties(self) -> dict[str, str]:
        return controller_properties(self)

    def _answers(self, remaining: float) -> bool:
        return _tcp_accepts(self.controller_port)


class KafkaCluster:
    """A controller and `brokers` brokers on 127.0.0.1; any broker can be stopped, killed and restarted by id.

    Ports and data dirs are fixed when the object is built, so a restarted broker comes back as the
    same node with its log, as a rebooted machine would.
    """

    def __init__(self, data_dir: Path, brokers: int = 3) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.data_dir = Path(data_dir).resolve()
        self.cluster_id = _formatted_cluster_id(self.data_dir / "controller") or new_cluster_id()
        self.controller = ClusterController(self.data_dir / "controller", self.cluster_id)
        self.brokers: dict[int, ClusterBroker] = {}
        for node_id in range(1, brokers + 1):
            self.brokers[node_id] = ClusterBroker(self.data_dir / f"broker-{node_id}", node_id, self)

    @property
    def voters(self) -> str:
        return f"{CONTROLLER_ID}@{HOST}:{self.controller.controller_port}"

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address, as a client of a real cluster would list them."""
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    def running(self) -> list[int]:
        return [node_id for node_id, broker in self.brokers.items() if broker.is_running()]

    def start(self, timeout: float = 180) -> str:
        """Start every node that is down; returns once all brokers are registered with the controller."""
        deadline = time.monotonic() + timeout
        self.controller.start(timeout)
        self._start_brokers(self.brokers, deadline)
        self.wait_for_brokers(len(self.brokers), max(deadline - time.monotonic(), 5.0))
        return self.bootstrap_servers

    def stop(self) -> None:
        # Brokers first: a broker whose controller is gone waits on it during a controlled shutdown.
        with ThreadPoolExecutor(max_workers=len(self.brokers)) as pool:
            list(pool.map(lambda b: b.stop(), self.brokers.values()))
        self.controller.stop()

    def stop_broker(self, node_id: int) -> None:
        """Controlled shutdown: the broker hands its partitions' leadership over before it exits."""
        self.brokers[node_id].stop()

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL: the controller learns of it only when the broker's session expires."""
        self.brokers[node_id].kill()

    def start_broker(self, node_id: int, timeout: float = 120) -> None:
        """Bring a stopped or killed broker back under its id; returns once the controller has it again."""
        self.start_brokers([node_id], timeout)

    def start_brokers(self, node_ids: list[int], timeout: float = 120) -> None:
        """Bring stopped or killed brokers back together (their JVMs start side by side)."""
        self._start_brokers({n: self.brokers[n] for n in node_ids}, time.monotonic() + timeout)
        self.wait_for_brokers(len(self.running()), timeout)

    def wait_for_brokers(self, count: int, timeout: float = 60) -> None:
        """Until the cluster's metadata lists `count` live brokers."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "logger": _quiet_logger()})
        deadline = time.monotonic() + timeout
        while True:
            try:
                if len(admin.list_topics(timeout=5).brokers) >= count:
                    return
            except Exception:  # KafkaException while no broker answers yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {count} brokers registered after {timeout:.0f} s")
            time.sleep(0.3)

    def leaders(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the broker id leading it now (-1 while it has no leader)."""
        topics = list(topics)
        metadata = self._metadata(topics)
        return {(topic, p.id): p.leader for topic in topics for p in metadata.topics[topic].partitions.values()}

    def in_sync(self, topics: Iterable[str]) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> the broker ids in its ISR now."""
        topics = list(topics)
        metadata = self._metadata(topics)
        return {(topic, p.id): list(p.isrs) for topic in topics for p in metadata.topics[topic].partitions.values()}

    def wait_fully_in_sync(self, topics: Iterable[str], timeout: float = 120) -> None:
        """Until every replica of these topics' partitions is back in their ISR (after a restart)."""
        topics = list(topics)
        deadline = time.monotonic() + timeout
        while True:
            metadata = self._metadata(topics)
            lagging = [
                (topic, p.id)
                for topic in topics
                for p in metadata.topics[topic].partitions.values()
                if set(p.isrs) != set(p.replicas)
            ]
            if not lagging:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"partitions still out of sync after {timeout:.0f} s: {lagging}")
            time.sleep(0.5)

    def log_tails(self, lines: int = 30) -> str:
        nodes: Mapping[str, KafkaBroker] = {
            "controller": self.controller,
            **{f"broker {i}": b for i, b in self.brokers.items()},
        }
        return "\n".join(f"--- {name}:\n{node.log_tail(lines)}" for name, node in nodes.items())

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start_brokers(self, brokers: Mapping[int, ClusterBroker], deadline: float) -> None:
        # In parallel: each JVM start is mostly waiting on class loading and the controller.
        down = [b for b in brokers.values() if not b.is_running()]
        if not down:
            return
        with ThreadPoolExecutor(max_workers=len(down)) as pool:
            for future in [pool.submit(b.start, max(deadline - time.monotonic(), 5.0)) for b in down]:
                future.result()

    def _metadata(self, topics: list[str], timeout: float = 30):
        """Cluster metadata once it lists every topic of `topics` (a new topic reaches brokers one by one)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "logger": _quiet_logger()})
        deadline = time.monotonic() + timeout
        while True:
            metadata = admin.list_topics(timeout=timeout)
            if all(t in metadata.topics and metadata.topics[t].partitions for t in topics):
                return metadata
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics missing from the metadata after {timeout:.0f} s: {topics}")
            time.sleep(0.2)


def _formatted_cluster_id(node_dir: Path) -> str | None:
    """The id a data dir was formatted with, so that a cluster run again on it is the same cluster."""
    meta = node_dir / "kraft-logs" / "meta.properties"
    if not meta.exists():
        return None
    for line in meta.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "cluster.id":
            return value.strip()
    return None


def _quiet_logger():
    import logging

    # Connection errors to a broker a test has killed are expected; they must not bury its output.
    quiet = logging.getLogger("ops.kafka.cluster.admin")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
    return quiet


# -------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.kafka.cluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a cluster in the foreground until SIGINT/SIGTERM")
    run.add_argument("--brokers", type=int, default=3)
    run.add_argument("--data-dir", default=str(cache_root() / "kafka-cluster"), help="default: %(default)s")
    run.add_argument("--timeout", type=float, default=180, help="start-up timeout, seconds")
    args = parser.parse_args(argv)

    stop_requested = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop_requested.set())
    cluster = KafkaCluster(Path(args.data_dir), brokers=args.brokers)
    try:
        print(f"bootstrap={cluster.start(args.timeout)}", flush=True)
        while not stop_requested.wait(0.5):
            if len(cluster.running()) < args.brokers or not cluster.controller.is_running():
                print(f"a node exited unexpectedly:\n{cluster.log_tails()}", file=sys.stderr)
                return 1
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
