"""Smoke tests for the session Kafka broker (tests/kafka_fixture.py, ops/kafka/launcher.py)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from ops.kafka.cluster import KafkaCluster
from ops.kafka.launcher import KafkaBroker, broker_properties, new_cluster_id, write_properties

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _create_topic(bootstrap: str) -> str:
    topic = f"launcher-smoke-{uuid.uuid4().hex[:8]}"
    # Keep the client referenced until the futures resolve: once it is
    # collected they fail with _DESTROY.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    return topic


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, key=b"k", value=value)
    assert producer.flush(30) == 0, "message not delivered"


def _consume_one(bootstrap: str, topic: str, timeout: float = 30) -> bytes | None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",  # fresh group: read from the start
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                return msg.value()
        return None
    finally:
        consumer.close()


@pytest.mark.kafka
def test_produce_and_consume(kafka_bootstrap: str) -> None:
    topic = _create_topic(kafka_bootstrap)
    _produce(kafka_bootstrap, topic, b"hello")
    assert _consume_one(kafka_bootstrap, topic) == b"hello"


@pytest.mark.kafka
def test_restart_keeps_data_and_address(kafka_broker: KafkaBroker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = _create_topic(bootstrap)
    _produce(bootstrap, topic, b"survives-restart")

    assert kafka_broker.restart() == bootstrap
    assert kafka_broker.is_running()
    assert _consume_one(bootstrap, topic) == b"survives-restart"


@pytest.mark.kafka
def test_stopped_broker_is_restarted_for_later_tests(kafka_broker: KafkaBroker) -> None:
    # Leaves the broker down on purpose: the plugin's teardown hook must bring it back.
    kafka_broker.stop()
    assert not kafka_broker.is_running()


@pytest.mark.kafka
def test_broker_is_back_after_a_test_stopped_it(kafka_bootstrap: str, kafka_broker: KafkaBroker) -> None:
    assert kafka_broker.is_running()
    topic = _create_topic(kafka_bootstrap)
    _produce(kafka_bootstrap, topic, b"back")
    assert _consume_one(kafka_bootstrap, topic) == b"back"


def test_extra_config_overrides_defaults(tmp_path: Path) -> None:
    props = broker_properties(9092, 9093, tmp_path, {"num.partitions": "3", "sasl.enabled.mechanisms": "PLAIN"})
    assert props["num.partitions"] == "3"
    assert props["sasl.enabled.mechanisms"] == "PLAIN"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"


def test_properties_file_escapes_backslashes(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    write_properties(path, {"a.b": "C:\\x", "jaas": 'x required username="u";'})
    assert path.read_text() == 'a.b=C:\\\\x\njaas=x required username="u";\n'


def test_cluster_id_format() -> None:
    cluster_id = new_cluster_id()
    # Kafka's Uuid.toString(): url-safe base64 of 16 bytes, unpadded.
    assert len(cluster_id) == 22
    assert not cluster_id.startswith("-")


def test_cluster_brokers_replicate_like_production_and_share_one_controller(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path, brokers=3)
    controller = cluster.controller.properties()
    assert controller["process.roles"] == "controller"
    assert controller["listeners"] == f"CONTROLLER://127.0.0.1:{cluster.controller.controller_port}"
    assert "advertised.listeners" not in controller
    for node_id, broker in cluster.brokers.items():
        props = broker.properties()
        assert (props["process.roles"], props["node.id"]) == ("broker", str(node_id))
        assert props["controller.quorum.voters"] == f"0@127.0.0.1:{cluster.controller.controller_port}"
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{broker.port}"
        assert props["offsets.topic.replication.factor"] == props["transaction.state.log.replication.factor"] == "3"
        assert props["transaction.state.log.min.isr"] == props["min.insync.replicas"] == "2"
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
    assert len({b.cluster_id for b in cluster.brokers.values()} | {cluster.controller.cluster_id}) == 1


def test_one_broker_cluster_asks_for_no_more_replicas_than_it_has(tmp_path: Path) -> None:
    props = KafkaCluster(tmp_path, brokers=1).brokers[1].properties()
    assert props["offsets.topic.replication.factor"] == props["min.insync.replicas"] == "1"
