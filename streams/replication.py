"""What the worker does while an output partition has fewer in-sync replicas than `min.insync.replicas`.

Then every acks=all write to it fails with NOT_ENOUGH_REPLICAS (a cluster that lost brokers). No
document may be dropped for it and the worker must not crash:

- the clients retry the write themselves (aiokafka every 100 ms until the producer's request
  timeout; librdkafka with its growing back-off until the message timeout);
- when a client gives up, the driver writes the batch again after a growing pause (`Backoff`,
  `write_until_acknowledged`) instead of crashing (Faust) or redoing the batch at once (exactly-once);
- `ReplicationWatch` reads the cluster's metadata on a thread of its own and puts one pipeline
  alert on the alerts topic when an output partition falls short, and logs when all are whole again.

The drivers only call into this module, so both share one behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from schemas.messages import AlertRecord
from streams.kafka_io import client_config
from streams.settings import Settings

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 2.0
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class ShortPartition:
    """An output partition that cannot take an acks=all write now."""

    topic: str
    partition: int
    in_sync: int
    replicas: int
    has_leader: bool

    def __str__(self) -> str:
        leader = "" if self.has_leader else ", no leader"
        return f"{self.topic}[{self.partition}] {self.in_sync}/{self.replicas} in sync{leader}"


def short_partitions(metadata: ClusterMetadata, topics: Iterable[str], min_insync: int) -> list[ShortPartition]:
    """The partitions of `topics` with no leader or fewer than `min_insync` replicas in sync."""
    short = []
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None:
            continue
        for p in described.partitions.values():
            has_leader = p.leader >= 0
            if not has_leader or len(p.isrs) < min_insync:
                short.append(ShortPartition(topic, p.id, len(p.isrs), len(p.replicas), has_leader))
    return sorted(short, key=lambda s: (s.topic, s.partition))


class Backoff:
    """Pauses between tries of one failing write: `first_s`, doubling, at most `max_s`; `reset()` after a success."""

    def __init__(self, first_s: float = 0.5, max_s: float = 30.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next = first_s

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next = self.first_s


async def write_until_acknowledged(
    write: Callable[[], Awaitable[None]], retriable: Callable[[Exception], bool], backoff: Backoff, what: str
) -> None:
    """`write()` again after a growing pause while it fails `retriable`-ly; a batch is never given up on.

    Redone writes may repeat records the broker already has: in at-least-once mode those are
    byte-identical outside `processing`, which is what that mode promises. Any other error
    (authorisation, a record too large) is raised: no pause would cure it.
    """
    while True:
        try:
            await write()
        except Exception as exc:
            if not retriable(exc):
                raise
            delay = backoff.next()
            log.warning("%s failed (%s: %s); writing it again in %.1f s", what, type(exc).__name__, exc, delay)
            await asyncio.sleep(delay)
            continue
        backoff.reset()
        return


class ReplicationWatch:
    """Tells operations when an output partition is short of in-sync replicas, and when it is whole again.

    The alert goes to the alerts topic, whose partitions need one replica in sync: on a topic with
    the documents' minimum it would wait on the very shortage it reports.
    """

    def __init__(self, settings: Settings, interval_s: float = WATCH_INTERVAL_S) -> None:
        self.settings = settings
        self.interval_s = interval_s
        t = settings.topics
        # The alerts topic asks for one replica in sync (streams/topics.py): it stays writable.
        self.topics = [t.fields, t.review, t.dead_letter, t.audit]
        quiet = logging.getLogger(f"{__name__}.client")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False  # broker connection errors are what this watch reports, once
        self._admin = AdminClient({**client_config(settings), "logger": quiet})
        self._producer = Producer(
            {**client_config(settings), "enable.idempotence": True, "linger.ms": 0, "logger": quiet}
        )
        self.short: list[ShortPartition] = []
        self.alerts_sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ReplicationWatch:
        self._thread = threading.Thread(target=self._run, name="replication-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval_s + 10)
        self._producer.flush(5)

    def check(self) -> list[ShortPartition]:
        """Read the metadata once; alert on a new shortage, log its end. Returns the short partitions."""
        try:
            metadata = self._admin.list_topics(timeout=10)
        except Exception as exc:  # no broker answers at all: nothing to read, nowhere to write the alert
            log.warning("replication watch: cluster metadata unavailable (%s)", exc)
            return self.short
        short = short_partitions(metadata, self.topics, self.settings.topics.min_insync_replicas)
        if short and not self.short:
            self._alert(short)
        elif self.short and not short:
            log.warning(
                "every output partition has %d replicas in sync again", self.settings.topics.min_insync_replicas
            )
        self.short = short
        self._producer.poll(0)
        return short

    def _alert(self, short: list[ShortPartition]) -> None:
        message = (
            f"{len(short)} output partition(s) below min.insync.replicas="
            f"{self.settings.topics.min_insync_replicas}: writes stall (NOT_ENOUGH_REPLICAS) and are retried "
            f"until brokers return; no document is dropped. {', '.join(map(str, short[:12]))}"
        )
        log.error("%s", message)
        worker_id = self.settings.worker.worker_id
        raised_at = datetime.now(UTC)
        alert = AlertRecord(
            alert_id=f"{worker_id}/not_enough_replicas/{raised_at.isoformat()}",
            kind="pipeline",
            severity="critical",
            doc_id=None,
            trace_id=None,
            message=message,
            worker_id=worker_id,
            raised_at=raised_at,
        )
        self._producer.produce(self.settings.topics.alerts, key=worker_id.encode(), value=_encoder.encode(alert))
        self.alerts_sent += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.check()
            self._stop.wait(max(self.interval_s - (time.monotonic() - started), 0.1))
