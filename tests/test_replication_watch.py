"""The replication watch on a real single broker: a partition is short against its topic's own
`min.insync.replicas`, as the broker holds it, not against the settings' default (2, a cluster's).
The demo's single broker creates its topics with 1 and 1; a worker started with the default
settings once raised a critical alert for all 24 output partitions there."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from ops.stress.worker_process import isolated_settings
from streams.kafka.clients import client_config
from streams.kafka.replication import ReplicationWatch
from streams.kafka.topics import create_topics
from streams.settings import Settings


def test_the_watch_reads_each_topic_s_own_minimum_in_sync(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings, _ = isolated_settings(kafka_bootstrap, tmp_path, tmp_path / "faust")
    create_topics(settings)  # one replica, min.insync.replicas 1 on the single broker
    settings.topics.min_insync_replicas = 2  # what a worker on the default settings asks for
    watch = ReplicationWatch(settings, config_refresh_s=0.0)
    try:
        assert watch.check() == []
        assert watch.alerts_sent == 0, "a topic whose own minimum is met raised an alert"

        # An admin raises the fields topic's minimum above its one replica: now it is short.
        raise_min_insync(settings, settings.topics.fields)
        # The broker applies an altered config a moment after it answers.
        deadline = time.monotonic() + 30
        while watch.min_insync()[settings.topics.fields] != 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        short = watch.check()
        assert {s.topic for s in short} == {settings.topics.fields}
        assert len(short) == settings.topics.partitions
        assert str(short[0]) == f"{settings.topics.fields}[0] 1/1 in sync (min 2)"
        assert watch.alerts_sent == 1
    finally:
        watch.stop()


def raise_min_insync(settings: Settings, topic: str) -> None:
    """As an admin would: `min.insync.replicas` 2 on a topic of one replica, so every partition is short."""
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)],
    )
    admin = AdminClient(client_config(settings))  # held: a dropped client fails its futures
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_the_audit_topic_counts_only_while_the_audit_trail_is_on(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings, _ = isolated_settings(kafka_bootstrap, tmp_path, tmp_path / "faust")
    create_topics(settings)
    raise_min_insync(settings, settings.topics.audit)
    off = ReplicationWatch(settings, config_refresh_s=0.0)
    settings.worker.audit = True
    on = ReplicationWatch(settings, config_refresh_s=0.0)
    try:
        assert settings.topics.audit not in off.topics
        # The broker applies an altered config a moment after it answers.
        deadline = time.monotonic() + 30
        while on.min_insync()[settings.topics.audit] != 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert off.check() == [] and off.alerts_sent == 0, "the audit topic counted with the audit trail off"
        short = on.check()
        assert {s.topic for s in short} == {settings.topics.audit} and len(short) == settings.topics.partitions
    finally:
        off.stop()
        on.stop()
