"""The topics SeqStream reads and writes, and their idempotent creation.

Faust creates only its own internal topics; these must exist before a worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streams.kafka_io import client_config
from streams.settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str]


def topic_specs(settings: Settings) -> list[TopicSpec]:
    t = settings.topics

    def spec(name: str, **config: str) -> TopicSpec:
        return TopicSpec(name, t.partitions, t.replication_factor, config)

    # Records keyed by doc_id are upserts: compaction keeps the latest per document, which is what
    # makes at-least-once redelivery harmless downstream. Alerts and dead letters are events.
    compacted = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
    return [
        spec(t.raw, **{"cleanup.policy": "delete", "retention.ms": str(t.raw_retention_ms)}),
        spec(t.fields, **compacted),
        spec(t.review, **compacted),
        spec(t.alerts, **{"cleanup.policy": "delete", "retention.ms": str(t.event_retention_ms)}),
        # The latest trace per document, like the record it explains.
        spec(t.audit, **compacted),
        spec(
            t.dead_letter,
            **{
                "cleanup.policy": "delete",
                "retention.ms": str(t.event_retention_ms),
                "max.message.bytes": str(t.dead_letter_max_message_bytes),
            },
        ),
    ]


def create_topics(settings: Settings, timeout_s: float = 30.0) -> dict[str, str]:
    """Create missing topics; returns name -> "created" or "exists". Safe to run again."""
    admin = AdminClient(client_config(settings))
    specs = topic_specs(settings)
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    outcome = {s.name: "exists" for s in specs if s.name in existing}
    missing = [
        NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replication_factor, config=s.config)
        for s in specs
        if s.name not in existing
    ]
    if not missing:
        return outcome
    for name, future in admin.create_topics(missing, operation_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
            outcome[name] = "created"
        except KafkaException as exc:
            # Another worker may have created it between our listing and our request.
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
            outcome[name] = "exists"
    return outcome
