"""pytest plugin that provides a Kafka broker for the test session.

Register it with `pytest_plugins = ["tests.kafka_fixture"]` in tests/conftest.py
(or `-p tests.kafka_fixture`). The broker is chosen once per session, first match wins:

1. `KAFKA_BOOTSTRAP_SERVERS` in the environment: an external broker, used as is;
2. a testcontainers `KafkaContainer`, when a Docker engine answers a ping;
3. the Maven-jar launcher (ops.kafka.launcher) with a temporary data dir.

`SEQSTREAM_KAFKA=launcher` skips the Docker probe and forces option 3.
Only the launcher can be restarted, so `kafka_broker` skips the test otherwise.

`kafka_cluster` is a three-broker cluster (ops/kafka/cluster.py) beside that broker, always from the
launcher (its brokers are killed and restarted by id), one per test module: four JVMs are too much
to keep running through the rest of the suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ops.kafka.cluster import KafkaCluster
from ops.kafka.launcher import KafkaBroker

DEFAULT_IMAGE = "confluentinc/cp-kafka:7.6.0"
DOCKER_PING_TIMEOUT_S = 2


@dataclass(frozen=True)
class KafkaBackend:
    bootstrap: str
    kind: str  # "env", "testcontainers" or "launcher"
    broker: KafkaBroker | None = None


# Set while the launcher broker (and a module's cluster) is up, for the teardown hook below.
_launched: KafkaBroker | None = None
_cluster: KafkaCluster | None = None
CLUSTER_BROKERS = 3


def _docker_available() -> bool:
    try:
        import docker

        # from_env() already asks the engine for its API version; with the
        # timeout, a missing socket or dead engine fails in well under 2 s.
        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT_S)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _start_container() -> Iterator[KafkaBackend]:
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # testcontainers < 4.9
        from testcontainers.kafka import KafkaContainer

    image = os.environ.get("SEQSTREAM_KAFKA_IMAGE", DEFAULT_IMAGE)
    with KafkaContainer(image).with_kraft() as container:
        yield KafkaBackend(container.get_bootstrap_server(), "testcontainers")


def _start_launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBackend]:
    global _launched
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    _launched = broker
    try:
        yield KafkaBackend(broker.bootstrap_servers, "launcher", broker)
    finally:
        _launched = None
        broker.stop()


@pytest.fixture(scope="session")
def kafka_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBackend]:
    """The session's broker. kafka_bootstrap and kafka_broker share it, so it starts once."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield KafkaBackend(external, "env")
    elif os.environ.get("SEQSTREAM_KAFKA") != "launcher" and _docker_available():
        yield from _start_container()
    else:
        yield from _start_launcher(tmp_path_factory)


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_backend: KafkaBackend) -> str:
    """bootstrap.servers of a running broker."""
    return kafka_backend.bootstrap


@pytest.fixture(scope="session")
def kafka_broker(kafka_backend: KafkaBackend) -> KafkaBroker:
    """The launcher's KafkaBroker, for tests that stop/restart the broker."""
    if kafka_backend.broker is None:
        pytest.skip(
            f"needs the in-process Kafka launcher to restart the broker, but the session uses "
            f"a {kafka_backend.kind} broker at {kafka_backend.bootstrap}"
        )
    return kafka_backend.broker


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A controller and three brokers on loopback; tests kill and restart brokers by id."""
    global _cluster
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), brokers=CLUSTER_BROKERS)
    cluster.start()
    _cluster = cluster
    try:
        yield cluster
    finally:
        _cluster = None
        cluster.stop()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # kafka_broker is session-scoped, so a test that stops the broker and then
    # fails would leave it down for every later test. Bring it back here.
    broker = _launched
    if broker is not None and "kafka_broker" in getattr(item, "fixturenames", ()) and not broker.is_running():
        broker.start()
    # The same for a cluster broker that a failed test left killed.
    cluster = _cluster
    if cluster is not None and "kafka_cluster" in getattr(item, "fixturenames", ()):
        for node_id in set(cluster.brokers) - set(cluster.running()):
            cluster.start_broker(node_id)
