"""Topic settings for a cluster: every topic asks for the configured replicas and in-sync minimum,
and settings that a cluster could not honour are refused before anything is created."""

from __future__ import annotations

import pytest

from streams.kafka.topics import ReplicationError, check_replication, topic_specs
from streams.settings import load_settings


def test_defaults_suit_a_three_broker_cluster() -> None:
    settings = load_settings({})
    specs = {s.name: (s.replication_factor, s.config["min.insync.replicas"]) for s in topic_specs(settings)}
    # Alerts stay writable and readable with one broker left: reporting the shortage is their job.
    assert specs.pop(settings.topics.alerts) == (3, "1")
    assert set(specs.values()) == {(3, "2")}


def test_every_topic_carries_the_configured_minimum_in_sync() -> None:
    settings = load_settings(
        {"SEQSTREAM_TOPICS__REPLICATION_FACTOR": "5", "SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS": "3"}
    )
    specs = [s for s in topic_specs(settings) if s.name != settings.topics.alerts]
    assert {(s.replication_factor, s.config["min.insync.replicas"]) for s in specs} == {(5, "3")}


def test_more_replicas_than_live_brokers_is_refused_with_the_way_out() -> None:
    with pytest.raises(ReplicationError, match=r"needs 3 brokers, but the cluster has 1 live.*REPLICATION_FACTOR"):
        check_replication(3, 2, live_brokers=1)
    check_replication(3, 2, live_brokers=3)
    check_replication(1, 1, live_brokers=1)


@pytest.mark.parametrize("min_isr", [0, 4])
def test_a_minimum_in_sync_outside_one_to_the_replication_factor_is_refused(min_isr: int) -> None:
    with pytest.raises(ReplicationError, match="MIN_INSYNC_REPLICAS"):
        check_replication(3, min_isr, live_brokers=3)
