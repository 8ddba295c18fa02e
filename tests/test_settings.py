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
