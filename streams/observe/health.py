"""Readiness, and what it and the lag gauge need to know about the broker, asked with a plain client.

Lag is the operator's definition (what `kafka-consumer-groups --describe` prints): log end offset
minus the group's committed offset, per partition. A confluent-kafka consumer that never subscribes
can read both for the worker's group without joining it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams import metrics
from streams.kafka.clients import client_config
from streams.settings import Settings

if TYPE_CHECKING:
    from model import Engine


@dataclass
class Readiness:
    consumer_assigned: bool
    model_loaded: bool
    broker_reachable: bool

    @property
    def ready(self) -> bool:
        return self.consumer_assigned and self.model_loaded and self.broker_reachable

    def body(self) -> dict[str, bool]:
        """What /readyz answers, with 200 when ready and 503 when not."""
        return {
            "ready": self.ready,
            "consumer_assigned": self.consumer_assigned,
            "model_loaded": self.model_loaded,
            "broker_reachable": self.broker_reachable,
        }


def check_readiness(assigned: Collection[tuple[str, int]], engine: Engine, broker_reachable: bool) -> Readiness:
    """Ready = raw-topic partitions assigned, a model loaded and the broker answering; the ready
    gauge follows every check. `broker_reachable` comes from `BrokerProbe.reachable`, which blocks:
    the caller decides on which thread it runs."""
    state = Readiness(
        consumer_assigned=bool(assigned),
        # The CLI loads the model before the worker starts; an engine without its info is not usable.
        model_loaded=getattr(engine, "info", None) is not None,
        broker_reachable=broker_reachable,
    )
    metrics.READY.set(1 if state.ready else 0)
    return state


class BrokerProbe:
    """Blocking calls: run them off the event loop. One lock, because the client is not re-entrant."""

    def __init__(self, settings: Settings, timeout_s: float = 2.0, group_id: str | None = None) -> None:
        """`group_id`: whose committed offsets `lag` reads; the worker's group by default."""
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._consumer = Consumer(
            {
                **client_config(settings),
                "group.id": group_id or settings.worker.app_id,
                "enable.auto.commit": False,
                # Without a committed offset the worker starts at the earliest (the app's setting).
                "auto.offset.reset": "earliest",
            }
        )

    def reachable(self) -> bool:
        with self._lock:
            try:
                self._consumer.list_topics(timeout=self.timeout_s)
                return True
            except KafkaException:
                return False

    def lag(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        tps = [TopicPartition(topic, partition) for topic, partition in sorted(partitions)]
        if not tps:
            return {}
        with self._lock:
            committed = self._consumer.committed(tps, timeout=self.timeout_s)
            result = {}
            for tp in committed:
                low, high = self._consumer.get_watermark_offsets(tp, timeout=self.timeout_s)
                # A negative offset means none committed yet: the group would start at the earliest.
                start = tp.offset if tp.offset >= 0 else low
                result[(tp.topic, tp.partition)] = max(high - start, 0)
            return result

    def close(self) -> None:
        with self._lock:
            self._consumer.close()
