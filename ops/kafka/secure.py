"""A secured single-node broker: SASL_SSL (SCRAM-SHA-512) for clients, TLS from a CA made on the spot,
ACLs enforced by KRaft's StandardAuthorizer. For tests and for trying the secured setup locally.

    tls = make_certificates(directory)                   # needs the `openssl` CLI
    broker = secure_broker(data_dir, tls, {"admin": pw, "seqstream-worker": pw2})

`admin` is the super user (the broker also uses it for its own inter-broker client); every
other user starts with no rights at all. Only the stdlib is imported, like the launcher.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ops.kafka.launcher import HOST, KafkaBroker

SUPER_USER = "admin"
MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path  # what clients trust (ssl_cafile)
    broker_cert: Path
    broker_key: Path  # unencrypted PKCS#8: Kafka's PEM keystore reads it without a key password


def _openssl(*args: str | Path, cwd: Path) -> None:
    result = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr[-2000:]}")


def make_certificates(directory: Path, days: int = 2) -> TlsFiles:
    """A throw-away CA and a broker certificate for localhost / 127.0.0.1 signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", str(days), "-subj", "/CN=seqstream-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost",
        cwd=directory,
    )  # fmt: skip
    # The names clients check (hostname verification is on by default in our settings).
    (directory / "broker.ext").write_text(
        f"subjectAltName=DNS:localhost,IP:{HOST}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
    )
    _openssl(
        "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "broker.pem", "-days", str(days), "-extfile", "broker.ext",
        cwd=directory,
    )  # fmt: skip
    return TlsFiles(directory / "ca.pem", directory / "broker.pem", directory / "broker.key")


def _jaas(username: str, password: str) -> str:
    login = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return f'{login} required username="{username}" password="{password}";'


def sasl_ssl_properties(port: int, controller_port: int, tls: TlsFiles, admin_password: str) -> dict[str, str]:
    """`extra_config` that replaces the PLAINTEXT client listener with SASL_SSL and turns ACLs on.

    The controller listener stays PLAINTEXT on 127.0.0.1: KRaft cannot use SCRAM there (the
    credentials live in the metadata the controller serves). The broker reaches its controller
    over it as User:ANONYMOUS, so that principal must be a super user; no client listener
    yields it, because every client listener authenticates.
    """
    return {
        "listeners": f"{LISTENER}://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"{LISTENER}://{HOST}:{port}",
        "listener.security.protocol.map": f"{LISTENER}:{LISTENER},CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": LISTENER,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": _jaas(SUPER_USER, admin_password),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": tls.broker_cert.read_text(),
        "ssl.keystore.key": tls.broker_key.read_text(),
        # The broker's own inter-broker client must trust the CA too: Kafka checks at start-up
        # that a client engine built from these settings can talk to its server engine.
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": tls.ca_cert.read_text(),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{SUPER_USER};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }


def scram_format_args(users: Mapping[str, str]) -> list[str]:
    """StorageTool arguments that store each user's SCRAM credential at format time (KIP-900)."""
    args: list[str] = []
    for name, password in users.items():
        args += ["--add-scram", f"{MECHANISM}=[name={name},password={password}]"]
    return args


def client_security(tls: TlsFiles, username: str, password: str) -> dict[str, str]:
    """librdkafka options for one user on this broker (what `KafkaSettings` maps to for confluent-kafka)."""
    return {
        "security.protocol": LISTENER,
        "sasl.mechanism": MECHANISM,
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": str(tls.ca_cert),
    }


def secure_broker(data_dir: Path, tls: TlsFiles, users: Mapping[str, str]) -> KafkaBroker:
    """A KafkaBroker (not started) with SASL_SSL, ACLs and these SCRAM users; `users` must name the admin."""
    broker = KafkaBroker(data_dir, format_args=scram_format_args(users))
    broker.extra_config.update(sasl_ssl_properties(broker.port, broker.controller_port, tls, users[SUPER_USER]))
    broker.client_config.update(client_security(tls, SUPER_USER, users[SUPER_USER]))
    return broker
