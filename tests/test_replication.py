"""The worker's conduct while output partitions are short of in-sync replicas (streams/kafka/replication.py),
without a broker: which partitions count as short, the pause between tries, the write loop.
The same behaviour on a real cluster with brokers killed: tests/test_cluster_faults.py."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import ClusterMetadata, PartitionMetadata, TopicMetadata

from streams.kafka.backoff import Backoff
from streams.kafka.replication import short_partitions, write_until_acknowledged


def _metadata(partitions: dict[str, list[tuple[int, list[int]]]]) -> ClusterMetadata:
    """Topic -> [(leader, isr)], every partition with three replicas."""
    metadata = ClusterMetadata()
    for name, described in partitions.items():
        topic = TopicMetadata()
        topic.topic = name
        for i, (leader, isr) in enumerate(described):
            p = PartitionMetadata()
            p.id, p.leader, p.replicas, p.isrs = i, leader, [1, 2, 3], isr
            topic.partitions[i] = p
        metadata.topics[name] = topic
    return metadata


def test_a_partition_is_short_below_the_minimum_in_sync_or_without_a_leader() -> None:
    metadata = _metadata(
        {
            "fields": [(1, [1, 2, 3]), (2, [2, 3]), (3, [3])],
            "review": [(-1, [])],
            "raw": [(1, [1])],  # not an output: reading it needs no in-sync minimum
        }
    )
    short = short_partitions(metadata, {"fields": 2, "review": 2, "missing": 2})
    assert [str(s) for s in short] == ["fields[2] 1/3 in sync (min 2)", "review[0] 0/3 in sync (min 2), no leader"]
    # Each topic against its own minimum (what the broker enforces), not one number for all.
    assert short_partitions(metadata, {"fields": 1}) == []
    assert [str(s) for s in short_partitions(metadata, {"fields": 3, "review": 0})] == [
        "fields[1] 2/3 in sync (min 3)",
        "fields[2] 1/3 in sync (min 3)",
        "review[0] 0/3 in sync (min 0), no leader",
    ]


def test_backoff_doubles_to_its_ceiling_and_starts_over_after_a_success() -> None:
    backoff = Backoff(first_s=0.5, max_s=3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


class Retriable(Exception):
    retriable = True


def test_a_batch_write_is_tried_again_until_it_is_acknowledged() -> None:
    tries: list[int] = []

    async def write() -> None:
        tries.append(len(tries))
        if len(tries) < 3:
            raise Retriable("NOT_ENOUGH_REPLICAS")

    backoff = Backoff(first_s=0.01, max_s=0.02)
    asyncio.run(write_until_acknowledged(write, lambda e: getattr(e, "retriable", False), backoff, "a batch"))
    assert tries == [0, 1, 2]
    assert backoff.next() == 0.01, "a success resets the pause"


def test_an_error_no_pause_can_cure_is_raised_at_once() -> None:
    tries: list[int] = []

    async def write() -> None:
        tries.append(1)
        raise PermissionError("TOPIC_AUTHORIZATION_FAILED")

    with pytest.raises(PermissionError):
        asyncio.run(write_until_acknowledged(write, lambda e: False, Backoff(0.01, 0.01), "a batch"))
    assert tries == [1]
