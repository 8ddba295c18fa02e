"""A `seqstream worker` as a child process, and a reader that gathers what it wrote; for the
end-to-end tests, which must see the real CLI, the real Faust app and the real broker at work, and
for the pipeline benchmark and the soak, which measure that same worker.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from ops.demo.samples import sample_documents
from ops.stress.soak import rss_bytes
from streams.kafka.clients import client_config, polled_messages
from streams.kafka.deadline import Stuck, within
from streams.settings import Settings, load_settings


def isolated_settings(
    bootstrap: str, model_dir: Path, data_dir: Path, **overrides: str
) -> tuple[Settings, dict[str, str]]:
    """Settings (and the same as environment variables) with topics and group of their own.

    `overrides` are `section__field=value`, e.g. `batch__max_documents="8"`.
    """
    run = uuid.uuid4().hex[:8]
    env = {
        "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "SEQSTREAM_TOPICS__RAW": f"t{run}.raw",
        "SEQSTREAM_TOPICS__FIELDS": f"t{run}.fields",
        "SEQSTREAM_TOPICS__REVIEW": f"t{run}.review",
        "SEQSTREAM_TOPICS__ALERTS": f"t{run}.alerts",
        "SEQSTREAM_TOPICS__DEAD_LETTER": f"t{run}.dead-letter",
        "SEQSTREAM_TOPICS__AUDIT": f"t{run}.audit",
        "SEQSTREAM_TOPICS__PARTITIONS": "3",
        # The session's broker is a single node; cluster tests override these.
        "SEQSTREAM_TOPICS__REPLICATION_FACTOR": "1",
        "SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS": "1",
        "SEQSTREAM_WORKER__APP_ID": f"seqstream-test-{run}",
        "SEQSTREAM_WORKER__DATA_DIR": str(data_dir),
        "SEQSTREAM_WORKER__WEB_PORT": "0",
        "SEQSTREAM_MODEL__PATH": str(model_dir),
        "SEQSTREAM_MODEL__MAX_NEW_TOKENS": "24",
        **{f"SEQSTREAM_{k.upper()}": v for k, v in overrides.items()},
    }
    return load_settings(env), env


def sample_messages(n: int, seed: int) -> tuple[list[bytes], set[str]]:
    """`n` sample documents as raw-topic messages, and their doc_ids (unique, or the accounting lies)."""
    values = [msgspec.json.encode(raw) for raw, _ in sample_documents(n, seed=seed)]
    ids = {json.loads(v)["doc_id"] for v in values}
    assert len(ids) == n, "sample doc_ids must be unique for the accounting to mean anything"
    return values, ids


WORKER_COMMAND = [sys.executable, "-m", "streams.cli.main", "worker"]


class WorkerProcess:
    """`command` replaces `seqstream worker`, e.g. with a wrapper that injects a fault."""

    def __init__(
        self, env: dict[str, str], log_path: Path, command: list[str] | None = None, cwd: Path | None = None
    ) -> None:
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.command = command or WORKER_COMMAND
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd)
        self.starts += 1

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def rss_bytes(self) -> int:
        """Resident memory now, from /proc (Linux): what the kernel charges the worker."""
        return rss_bytes(self.pid)

    def descendants(self) -> list[int]:
        """The processes running under the worker now (its preparing processes and theirs), from /proc."""
        parents = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                state, parent = _stat_fields(stat)[:2]
            except (OSError, IndexError, ValueError):
                continue  # ended while we looked
            if state not in ENDED:
                parents[int(stat.parent.name)] = int(parent)
        found, frontier = [], [self.pid]
        while frontier:
            under = frontier.pop()
            children = [pid for pid, parent in parents.items() if parent == under]
            found += children
            frontier += children
        return found

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()

    def assert_alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"worker exited with {self.process.returncode}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_ready(self, port: int, timeout_s: float = 120) -> dict:
        """Poll `/readyz` until it answers 200; returns its body."""
        deadline = time.monotonic() + timeout_s
        status, body = None, b""
        while time.monotonic() < deadline:
            self.assert_alive()
            status, body = http_get(f"http://127.0.0.1:{port}/readyz")
            if status == 200:
                return json.loads(body)
            time.sleep(0.5)
        raise AssertionError(f"/readyz never answered 200 (last: {status} {body!r})\n{self.log_tail()}")

    def log_count(self, text: str) -> int:
        return self.log_path.read_text(errors="replace").count(text) if self.log_path.exists() else 0

    def wait_for_log(self, text: str, count: int = 1, timeout_s: float = 120) -> None:
        """Until `text` has appeared `count` times in the log (the log is kept across restarts)."""
        deadline = time.monotonic() + timeout_s
        while self.log_count(text) < count:
            self.assert_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged {count} times in {timeout_s} s:\n{self.log_tail()}")
            time.sleep(0.2)


# /proc states of a process that has ended: a zombie awaiting its reaping, or dead.
ENDED = ("Z", "X")


def running(pid: int) -> bool:
    """Whether a process still runs: one that ended and awaits its reaping (a zombie) does not."""
    try:
        return _stat_fields(Path(f"/proc/{pid}/stat"))[0] not in ENDED
    except (OSError, IndexError):
        return False


def _stat_fields(stat: Path) -> list[str]:
    """/proc/PID/stat's fields after the command's name (which may hold spaces): state, parent, ..."""
    return stat.read_text().rsplit(")", 1)[1].split()


def free_port() -> int:
    """A port nobody listens on right now (the worker binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(url: str, timeout_s: float = 10) -> tuple[int | None, bytes]:
    """(status, body); status None while nothing listens yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return None, b""


@dataclass
class Outputs:
    """Everything read from the output topics so far, by topic."""

    records: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    keys: dict[str, list[bytes | None]] = field(default_factory=lambda: defaultdict(list))

    def doc_ids(self, *topics: str) -> list[str]:
        return [r["doc_id"] for t in topics for r in self.records[t]]

    def results(self, settings: Settings) -> list[dict]:
        """Every record that answers one input document: field, review and dead-letter records."""
        t = settings.topics
        return [r for topic in (t.fields, t.review, t.dead_letter) for r in self.records[topic]]


def without_processing(record: dict) -> bytes:
    """A record's bytes apart from `processing`, the one part a redelivery may change."""
    return msgspec.json.encode({k: v for k, v in record.items() if k != "processing"})


@dataclass
class Accounting:
    """Documents sent against the records that came back for them, keyed by doc_id."""

    sent: int
    received: int  # distinct documents with at least one result record
    duplicated: int  # result records beyond the first per document (at-least-once redeliveries)
    lost: list[str]
    unexpected: list[str]  # doc_ids that came back but were never sent
    differing: list[str]  # documents whose duplicates differ outside `processing`

    @classmethod
    def of(cls, sent_ids: set[str], records: list[dict]) -> Accounting:
        versions: dict[str, list[bytes]] = defaultdict(list)
        for record in records:
            versions[record.get("doc_id") or "<no doc_id>"].append(without_processing(record))
        return cls(
            sent=len(sent_ids),
            received=len(sent_ids & set(versions)),
            duplicated=sum(len(v) - 1 for v in versions.values()),
            lost=sorted(sent_ids - set(versions)),
            unexpected=sorted(set(versions) - sent_ids),
            differing=sorted(doc_id for doc_id, v in versions.items() if len(set(v)) > 1),
        )

    def assert_complete(self) -> None:
        assert not self.lost, f"{len(self.lost)} documents lost, e.g. {self.lost[:5]}"
        assert not self.unexpected, f"records for documents never sent: {self.unexpected[:5]}"
        assert not self.differing, f"duplicates differ outside `processing`: {self.differing[:5]}"

    def report(self, scenario: str, **more: object) -> None:
        """`report`'s line for `scenario`: what was sent, received, duplicated and lost, then `more`."""
        report(
            scenario, sent=self.sent, received=self.received, duplicated=self.duplicated, lost=len(self.lost), **more
        )


def report(scenario: str, **numbers: object) -> None:
    """One greppable line per scenario (run pytest with -s); ops/RELIABILITY.md quotes them."""
    print(f"\nRELIABILITY {scenario}: " + " ".join(f"{k}={v}" for k, v in numbers.items()), flush=True)


_quiet_logger = logging.getLogger("tests.output_reader")
_quiet_logger.addHandler(logging.NullHandler())
_quiet_logger.propagate = False


# librdkafka reports these as consumer errors and retries them itself: the group's coordinator moved
# or is loading (a broker of the cluster restarted). CI failed once on NOT_COORDINATOR here.
_COORDINATOR_MOVING = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS}
)


def _fail(error: KafkaError) -> None:
    if error.code() in _COORDINATOR_MOVING and not error.fatal():
        _quiet_logger.info("reader: %s (retried by the client)", error)
        return
    raise AssertionError(error)


READER_CLOSE_S = 30


class OutputReader:
    """read_committed, like every reader of ours: an aborted transaction's records are never seen;
    `read_uncommitted` shows them too (what a careless consumer of an exactly-once worker would get)."""

    def __init__(self, settings: Settings, isolation: str = "read_committed") -> None:
        t = settings.topics
        self.topics = [t.fields, t.review, t.alerts, t.dead_letter]
        self.consumer = Consumer(
            {
                **client_config(settings),
                "group.id": f"reader-{uuid.uuid4()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                # Connection errors while a test has the broker down are expected; the reader
                # reconnects by itself and its log would bury the test's own output.
                "logger": _quiet_logger,
            }
        )
        # Every partition assigned from its start, not a group subscription: closing a subscribed
        # consumer revokes its assignment in librdkafka's rebalance callback, which holds the GIL,
        # and after a test had restarted the broker that call blocked for good, the whole test run
        # with it (the deadline around `close` never got the GIL back to give up).
        # Each broker learns of new topics from the controller in its own time: the one this reader
        # asks may not know them yet, a moment after another said every replica was in sync.
        deadline = time.monotonic() + 30
        while True:
            metadata = self.consumer.list_topics(timeout=30)
            missing = [topic for topic in self.topics if topic not in metadata.topics]
            if not missing:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"output topics missing on the broker: {missing}")
            time.sleep(0.5)
        self.consumer.assign(
            [
                TopicPartition(topic, partition, OFFSET_BEGINNING)
                for topic in self.topics
                for partition in sorted(metadata.topics[topic].partitions)
            ]
        )
        self.outputs = Outputs()

    def read_until(self, done, timeout_s: float, worker: WorkerProcess | None = None) -> Outputs:
        deadline = time.monotonic() + timeout_s
        while not done(self.outputs):
            if time.monotonic() > deadline:
                tail = worker.log_tail() if worker else ""
                raise AssertionError(
                    f"timed out; read {dict((k, len(v)) for k, v in self.outputs.records.items())}\n{tail}"
                )
            if worker is not None:
                worker.assert_alive()
            for message in polled_messages(self.consumer.consume(500, timeout=1.0), _fail):
                self.outputs.records[message.topic()].append(msgspec.json.decode(message.value()))
                self.outputs.keys[message.topic()].append(message.key())
        return self.outputs

    def drain(self, idle_s: float = 3.0) -> Outputs:
        """Read on until nothing has arrived for `idle_s`: for asserting that no more records come."""
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            for message in self.consumer.consume(500, timeout=0.5):
                if message.error():
                    continue
                self.outputs.records[message.topic()].append(msgspec.json.decode(message.value()))
                self.outputs.keys[message.topic()].append(message.key())
                last = time.monotonic()
        return self.outputs

    def close(self) -> None:
        # librdkafka's close blocked for good once in CI after a test had restarted the broker (in C,
        # where pytest's timeout cannot reach): a reader is given up after a while instead, its
        # consumer left to the process's end.
        try:
            within(READER_CLOSE_S, "closing an output reader", self.consumer.close)
        except Stuck as exc:
            _quiet_logger.warning("%s: abandoned", exc)
