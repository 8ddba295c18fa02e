"""The topics SeqStream reads and writes, and their idempotent creation.

Faust creates only its own internal topics; these must exist before a worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streams.kafka.clients import client_config
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
        return TopicSpec(
            name, t.partitions, t.replication_factor, {"min.insync.replicas": str(t.min_insync_replicas), **config}
        )

    # Records keyed by doc_id are upserts: compaction keeps the latest per document, which is what
    # makes at-least-once redelivery harmless downstream. Alerts and dead letters are events.
    compacted = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
    return [
        spec(t.raw, **{"cleanup.policy": "delete", "retention.ms": str(t.raw_retention_ms)}),
        spec(t.fields, **compacted),
        spec(t.review, **compacted),
        # One in-sync replica suffices for alerts: a cluster short of brokers is what they must report,
        # and with the minimum above the replicas left neither writers nor readers would get past
        # it (Kafka 4 holds a partition's high watermark while its ISR is below the minimum).
        spec(
            t.alerts,
            **{"cleanup.policy": "delete", "retention.ms": str(t.event_retention_ms), "min.insync.replicas": "1"},
        ),
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


class ReplicationError(ValueError):
    """The replication settings cannot work on this cluster; nothing was created."""


def check_replication(replication_factor: int, min_insync_replicas: int, live_brokers: int) -> None:
    """Refuse settings under which topics could not be created or no acks=all write could ever succeed."""
    if not 1 <= min_insync_replicas <= replication_factor:
        raise ReplicationError(
            f"min.insync.replicas {min_insync_replicas} must be between 1 and the replication factor "
            f"{replication_factor} (SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS): with more, no write would be acknowledged"
        )
    if replication_factor > live_brokers:
        raise ReplicationError(
            f"replication factor {replication_factor} needs {replication_factor} brokers, but the cluster has "
            f"{live_brokers} live; lower SEQSTREAM_TOPICS__REPLICATION_FACTOR (and "
            "SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS) for a smaller cluster, e.g. 1 and 1 for a single development broker"
        )


def create_topics(settings: Settings, timeout_s: float = 30.0) -> dict[str, str]:
    """Create missing topics; returns name -> "created" or "exists". Safe to run again.

    Raises ReplicationError, before creating anything, for a replication factor larger than the
    cluster's live brokers or a `min.insync.replicas` above the replication factor.
    """
    admin = AdminClient(client_config(settings))
    specs = topic_specs(settings)
    metadata = admin.list_topics(timeout=timeout_s)
    existing = set(metadata.topics)
    outcome = {s.name: "exists" for s in specs if s.name in existing}
    missing = [
        NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replication_factor, config=s.config)
        for s in specs
        if s.name not in existing
    ]
    if not missing:
        return outcome
    check_replication(settings.topics.replication_factor, settings.topics.min_insync_replicas, len(metadata.brokers))
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
