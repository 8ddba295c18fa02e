"""A secured broker: SASL_SSL with SCRAM-SHA-512, TLS from a CA this test makes, ACLs enforced.

The worker runs as `seqstream-worker` with only the ACLs `seqstream acls grant` gives it; an
`intruder` with a valid login and no ACLs, a wrong password and a plaintext client are refused.
The broker is its own (not the session's plaintext one), so the rest of the suite is unaffected.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from ops.demo.samples import sample_documents
from ops.kafka.launcher import KafkaBroker
from ops.kafka.secure import SUPER_USER, TlsFiles, make_certificates, secure_broker
from ops.stress.worker_process import OutputReader, WorkerProcess, isolated_settings
from streams.cli.main import cli
from streams.kafka.acls import allow
from streams.kafka.clients import client_config, produce_lines
from streams.settings import Settings

pytestmark = pytest.mark.kafka

WORKER_USER = "seqstream-worker"
INTRUDER = "intruder"
DOCUMENTS = 12
# Any CJK character in the worker's log would be document text: the samples are Chinese, and
# nothing the worker logs by design (codes, counts, offsets, model info) is.
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef]")


@dataclass(frozen=True)
class SecuredBroker:
    broker: KafkaBroker
    tls: TlsFiles
    passwords: dict[str, str]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    root = tmp_path_factory.mktemp("secured-kafka")
    tls = make_certificates(root / "tls")
    passwords = {name: secrets.token_hex(16) for name in (SUPER_USER, WORKER_USER, INTRUDER)}
    broker = secure_broker(root / "data", tls, passwords)
    broker.start()  # its readiness probe already logs in as the admin over SASL_SSL
    try:
        yield SecuredBroker(broker, tls, passwords)
    finally:
        broker.stop()


def _as_user(settings: Settings, username: str, password: str) -> Settings:
    kafka = msgspec.structs.replace(settings.kafka, sasl_username=username, sasl_password=password)
    return msgspec.structs.replace(settings, kafka=kafka)


@pytest.fixture
def worker_settings(
    request: pytest.FixtureRequest, secured: SecuredBroker, tiny_model_dir: Path, tmp_path: Path
) -> tuple[Settings, dict[str, str]]:
    """The worker's settings (and env), its topics created and its ACLs granted by the admin.

    Parametrise indirectly with a delivery mode; at_least_once unless asked."""
    settings, env = isolated_settings(
        secured.broker.bootstrap_servers,
        tiny_model_dir,
        tmp_path / "faust",
        kafka__security_protocol="SASL_SSL",
        kafka__sasl_username=WORKER_USER,
        kafka__sasl_password=secured.passwords[WORKER_USER],
        kafka__ssl_cafile=str(secured.tls.ca_cert),
        worker__delivery=getattr(request, "param", "at_least_once"),
    )
    admin_env = {
        **env,
        "SEQSTREAM_KAFKA__SASL_USERNAME": SUPER_USER,
        "SEQSTREAM_KAFKA__SASL_PASSWORD": secured.passwords[SUPER_USER],
    }
    # What an operator runs: topics, then the worker's ACLs, both as the admin, from the environment.
    for command in (["topics", "create"], ["acls", "grant", f"User:{WORKER_USER}"]):
        result = CliRunner().invoke(cli, command, env=admin_env)
        assert result.exit_code == 0, result.output
    print(f"\n$ seqstream acls grant User:{WORKER_USER}\n{result.output}", end="")
    return settings, env


def _first_error(config: dict[str, str], timeout_s: float = 30) -> KafkaError:
    """The first client-level error a producer with `config` reports while trying to connect."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + timeout_s
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, f"no error within {timeout_s} s: the broker accepted the connection"
    return errors[0]


# Exactly-once needs one more grant (WRITE on its transactional id): running it proves that one is enough.
@pytest.mark.parametrize("worker_settings", ["at_least_once", "exactly_once"], indirect=True)
def test_worker_extracts_over_sasl_ssl_and_logs_no_secret_or_text(secured, worker_settings, tmp_path) -> None:
    settings, env = worker_settings
    t = settings.topics
    admin = _as_user(settings, SUPER_USER, secured.passwords[SUPER_USER])
    documents = [msgspec.json.encode(raw) for raw, _ in sample_documents(DOCUMENTS, seed=61)]
    sent_ids = {msgspec.json.decode(d)["doc_id"] for d in documents}
    texts = [msgspec.json.decode(d)["text"] for d in documents]

    worker = WorkerProcess(env, tmp_path / "worker.log")
    reader = OutputReader(admin)
    started = time.monotonic()
    try:
        worker.start()
        produce_lines(admin, t.raw, documents)
        out = reader.read_until(lambda o: sent_ids <= set(o.doc_ids(t.fields, t.review)), timeout_s=180, worker=worker)
        # The log is written at the default level while the work happens: its silence below means something.
        worker.wait_for_log("batch of ", timeout_s=30)
    finally:
        worker.stop()
        reader.close()
    elapsed = time.monotonic() - started

    log = worker.log_path.read_text(errors="replace")
    # The granted ACLs are enough: the worker never met a refusal (aiokafka would log one).
    assert "authorization" not in log.lower(), worker.log_tail()
    for name, password in secured.passwords.items():
        assert password not in log, f"{name}'s password is in the worker's log"
    assert not any(text in log for text in texts), "a document's text is in the worker's log"
    assert not CJK.search(log), f"document text in the worker's log: {CJK.search(log)}"
    print(
        f"\nRELIABILITY security ({settings.worker.delivery}): documents={DOCUMENTS} "
        f"results={len(out.doc_ids(t.fields, t.review))} "
        f"seconds={elapsed:.1f} log_lines={len(log.splitlines())} passwords_in_log=0 cjk_chars_in_log=0",
        flush=True,
    )


def test_principal_without_acls_may_neither_read_raw_nor_write_fields(secured, worker_settings) -> None:
    settings, _ = worker_settings
    intruder = client_config(_as_user(settings, INTRUDER, secured.passwords[INTRUDER]))
    admin = _as_user(settings, SUPER_USER, secured.passwords[SUPER_USER])
    produce_lines(admin, settings.topics.raw, [msgspec.json.encode(next(sample_documents(1, seed=62))[0])])

    # A consumer group of its own, so that the group is no obstacle: librdkafka reports a topic
    # refusal only once it is in a group (with assign() it stays silent, measured).
    group = f"intruder-{secrets.token_hex(4)}"
    binding = allow(f"User:{INTRUDER}", ResourceType.GROUP, group, AclOperation.READ)
    admin_client = AdminClient(client_config(admin))  # held: a dropped client fails its futures
    for future in admin_client.create_acls([binding]).values():
        future.result(timeout=30)
    consumer = Consumer({**intruder, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([settings.topics.raw])
    refusals: list[KafkaError] = []
    try:
        deadline = time.monotonic() + 30
        while not any(r.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for r in refusals):
            assert time.monotonic() < deadline, f"no topic authorization error in 30 s, only {refusals}"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is not None, "the intruder read a raw document"
                refusals.append(message.error())
    finally:
        consumer.close()

    delivered: list[KafkaError | None] = []
    producer = Producer({**intruder, "enable.idempotence": False, "message.timeout.ms": 20000})
    producer.produce(
        settings.topics.fields, b'{"forged": true}', on_delivery=lambda error, _msg: delivered.append(error)
    )
    assert producer.flush(30) == 0
    assert delivered[0] is not None and delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, delivered


def test_wrong_password_is_refused(secured, worker_settings) -> None:
    settings, _ = worker_settings
    wrong = client_config(_as_user(settings, WORKER_USER, "not-" + secured.passwords[WORKER_USER]))
    assert _first_error(wrong).code() == KafkaError._AUTHENTICATION


def test_plaintext_client_on_the_tls_port_is_refused(secured) -> None:
    plaintext = {"bootstrap.servers": secured.broker.bootstrap_servers}
    with pytest.raises(KafkaException):
        AdminClient(plaintext).list_topics(timeout=10)
    # The broker hangs up on bytes that are not a TLS handshake: a transport error, never metadata.
    assert _first_error(plaintext).code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
