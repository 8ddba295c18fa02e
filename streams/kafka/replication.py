"""What the worker does while an output partition has fewer in-sync replicas than `min.insync.replicas`.

Then every acks=all write to it fails with NOT_ENOUGH_REPLICAS (a cluster that lost brokers). No
document may be dropped for it and the worker must not crash:

- the clients retry the write themselves (aiokafka every 100 ms until the producer's request
  timeout; librdkafka with its growing back-off until the message timeout);
- when a client gives up, the driver writes the batch again after a growing pause (`Backoff`,
  `write_until_acknowledged`) instead of crashing (Faust) or redoing the batch at once (exactly-once);
- `ReplicationWatch` reads the cluster's metadata on a thread of its own and puts one pipeline
  alert on the alerts topic when an output partition falls short of its topic's own
  `min.insync.replicas` (read from the broker, not the settings: topics created by hand or by an
  earlier configuration carry theirs), and logs when all are whole again.

The drivers only call into this module, so both share one behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, ResourceType

from schemas.messages import AlertRecord
from streams.kafka.backoff import Backoff
from streams.kafka.clients import client_config
from streams.settings import Settings

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 2.0
# A topic's min.insync.replicas changes only when an admin alters it: read it again at most this often.
CONFIG_REFRESH_S = 60.0
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class ShortPartition:
    """An output partition that cannot take an acks=all write now."""

    topic: str
    partition: int
    in_sync: int
    replicas: int
    has_leader: bool
    min_insync: int

    def __str__(self) -> str:
        leader = "" if self.has_leader else ", no leader"
        return f"{self.topic}[{self.partition}] {self.in_sync}/{self.replicas} in sync (min {self.min_insync}){leader}"


def short_partitions(metadata: ClusterMetadata, min_insync: Mapping[str, int]) -> list[ShortPartition]:
    """The partitions with no leader or fewer replicas in sync than their topic's minimum.

    `min_insync` maps each topic to the minimum the broker holds for it.
    """
    short = []
    for topic, minimum in min_insync.items():
        described = metadata.topics.get(topic)
        if described is None:
            continue
        for p in described.partitions.values():
            has_leader = p.leader >= 0
            if not has_leader or len(p.isrs) < minimum:
                short.append(ShortPartition(topic, p.id, len(p.isrs), len(p.replicas), has_leader, minimum))
    return sorted(short, key=lambda s: (s.topic, s.partition))


def read_min_insync(admin: AdminClient, topics: Iterable[str], timeout_s: float = 10.0) -> dict[str, int]:
    """Each existing topic's `min.insync.replicas` as the broker holds it; topics it cannot describe are left out."""
    resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
    found = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
        try:
            entries = future.result(timeout=timeout_s)
        except KafkaException:  # not created yet, or no broker answered: the caller keeps what it knew
            continue
        found[resource.name] = int(entries["min.insync.replicas"].value)
    return found


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

    def __init__(
        self, settings: Settings, interval_s: float = WATCH_INTERVAL_S, config_refresh_s: float = CONFIG_REFRESH_S
    ) -> None:
        self.settings = settings
        self.interval_s = interval_s
        self.config_refresh_s = config_refresh_s
        t = settings.topics
        # The alerts topic asks for one replica in sync (streams/kafka/topics.py): it stays writable.
        # The audit topic only while the audit trail is on: otherwise nothing waits on its
        # partitions, and a shortage there would be an alarm about writes that never happen.
        self.topics = [t.fields, t.review, t.dead_letter, *([t.audit] if settings.worker.audit else [])]
        quiet = logging.getLogger(f"{__name__}.client")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False  # broker connection errors are what this watch reports, once
        self._admin = AdminClient({**client_config(settings), "logger": quiet})
        self._producer = Producer(
            {**client_config(settings), "enable.idempotence": True, "linger.ms": 0, "logger": quiet}
        )
        self.short: list[ShortPartition] = []
        self.alerts_sent = 0
        self._min_insync: dict[str, int] = {}
        self._min_insync_read_at = -config_refresh_s
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
        short = short_partitions(metadata, self.min_insync())
        if short and not self.short:
            self._alert(short)
        elif self.short and not short:
            log.warning("every output partition has its min.insync.replicas in sync again")
        self.short = short
        self._producer.poll(0)
        return short

    def min_insync(self) -> dict[str, int]:
        """Each output topic's own minimum, read again every `config_refresh_s` or while one is unknown.

        What the broker enforces is the topic's config, which the settings only proposed when the
        topic was created (a single broker's topics have 1 where the settings' default is 2). A
        topic not read yet (missing, or no broker answered) counts with the settings' value.
        """
        stale = time.monotonic() - self._min_insync_read_at > self.config_refresh_s
        if stale or len(self._min_insync) < len(self.topics):
            try:
                self._min_insync.update(read_min_insync(self._admin, self.topics))
                self._min_insync_read_at = time.monotonic()
            except KafkaException as exc:  # keep the values known; the metadata check still runs
                log.warning("replication watch: topic configs unavailable (%s)", exc)
        default = self.settings.topics.min_insync_replicas
        return {topic: self._min_insync.get(topic, default) for topic in self.topics}

    def _alert(self, short: list[ShortPartition]) -> None:
        message = (
            f"{len(short)} output partition(s) below their topic's min.insync.replicas: writes stall "
            f"(NOT_ENOUGH_REPLICAS) and are retried until brokers return; no document is dropped. "
            f"{', '.join(map(str, short[:12]))}"
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
