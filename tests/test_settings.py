"""The settings object and its environment form, which child workers (soak, demo) inherit."""

from __future__ import annotations

from streams.settings import load_settings, settings_environ


def test_environ_form_builds_the_same_settings() -> None:
    settings = load_settings(
        {"SEQSTREAM_BATCH__BUFFER_DOCUMENTS": "7", "SEQSTREAM_KAFKA__SESSION_TIMEOUT_S": "12.5"},
        model={"path": "/models/x"},
    )
    environ = settings_environ(settings)
    assert environ["SEQSTREAM_BATCH__BUFFER_DOCUMENTS"] == "7"
    assert load_settings(environ) == settings


def test_password_is_masked_in_every_printed_form() -> None:
    settings = load_settings(
        {"SEQSTREAM_KAFKA__SASL_PASSWORD": "hunter2-secret", "SEQSTREAM_KAFKA__SASL_USERNAME": "w"}
    )
    assert settings.kafka.sasl_password == "hunter2-secret"
    for text in (repr(settings), str(settings), f"{settings.kafka}", repr(settings.kafka)):
        assert "hunter2-secret" not in text and "sasl_password='***'" in text and "sasl_username='w'" in text


def test_one_set_of_fields_secures_both_client_libraries(tmp_path) -> None:
    from streams.kafka.client_log import CLIENT_LOG
    from streams.kafka.clients import client_config
    from streams.kafka.security import faust_credentials

    settings = load_settings(
        {
            "SEQSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
            "SEQSTREAM_KAFKA__SASL_USERNAME": "seqstream-worker",
            "SEQSTREAM_KAFKA__SASL_PASSWORD": "pw",
        }
    )
    assert client_config(settings) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "seqstream-worker",
        "sasl.password": "pw",
        "ssl.endpoint.identification.algorithm": "https",
        "logger": CLIENT_LOG,
    }
    credentials = faust_credentials(settings.kafka)
    assert credentials.protocol.value == "SASL_SSL" and credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.username == "seqstream-worker" and credentials.ssl_context.check_hostname
    assert "pw" not in repr(credentials)
    assert faust_credentials(load_settings({}).kafka) is None and client_config(load_settings({})) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "logger": CLIENT_LOG,
    }
