"""How `KafkaSettings`' security fields become client options: for confluent-kafka (librdkafka
names) and for the Faust worker (aiokafka, through `broker_credentials`). One mapping each, so the
CLI, the admin calls and the worker can never disagree about how to reach a secured broker.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from streams.settings import KafkaSettings

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT


def _uses_tls(kafka: KafkaSettings) -> bool:
    return kafka.security_protocol in ("SSL", "SASL_SSL")


def _uses_sasl(kafka: KafkaSettings) -> bool:
    return kafka.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def librdkafka_security(kafka: KafkaSettings) -> dict[str, str]:
    """confluent-kafka options; none at all for PLAINTEXT, so the default setup is untouched."""
    if kafka.security_protocol == "PLAINTEXT":
        return {}
    config = {"security.protocol": kafka.security_protocol}
    if _uses_sasl(kafka):
        config |= {
            "sasl.mechanism": kafka.sasl_mechanism,
            "sasl.username": kafka.sasl_username,
            "sasl.password": kafka.sasl_password,
        }
    if _uses_tls(kafka):
        config["ssl.endpoint.identification.algorithm"] = "https" if kafka.ssl_check_hostname else "none"
        if kafka.ssl_cafile:
            config["ssl.ca.location"] = kafka.ssl_cafile
        if kafka.ssl_certfile:
            config["ssl.certificate.location"] = kafka.ssl_certfile
        if kafka.ssl_keyfile:
            config["ssl.key.location"] = kafka.ssl_keyfile
    return config


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """The TLS context aiokafka gets: the configured CA (or the system's), hostname checks on by default."""
    context = ssl.create_default_context(cafile=kafka.ssl_cafile or None)
    context.check_hostname = kafka.ssl_check_hostname
    if kafka.ssl_certfile:
        context.load_cert_chain(kafka.ssl_certfile, kafka.ssl_keyfile or None)
    return context


def faust_credentials(kafka: KafkaSettings) -> CredentialsT | None:
    """Faust's `broker_credentials`; None (plaintext) when no security is configured."""
    import faust  # here, not at the top: the plain CLI commands need no Faust

    if _uses_sasl(kafka):
        # With an SSL context Faust speaks SASL_SSL, without one SASL_PLAINTEXT.
        return faust.SASLCredentials(
            mechanism=kafka.sasl_mechanism,
            username=kafka.sasl_username,
            password=kafka.sasl_password,
            ssl_context=ssl_context(kafka) if _uses_tls(kafka) else None,
        )
    if _uses_tls(kafka):
        return faust.SSLCredentials(ssl_context(kafka))
    return None
