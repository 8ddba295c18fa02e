"""`seqstream alerts` on a real broker, forwarding to a real HTTP server on this machine."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgspec
import pytest
from click.testing import CliRunner

from schemas.messages import AlertRecord, EntropyAlarm, TokenChoice
from streams.cli.alerts import alert_row
from streams.cli.main import cli
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics
from streams.settings import load_settings


def _alerts() -> list[AlertRecord]:
    now = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    alarms = [
        EntropyAlarm(
            chunk=0,
            step=step,
            entropy_nats=entropy,
            threshold=2.5,
            chosen=TokenChoice(token_id=17, text="王", prob=0.21),
            alternatives=[TokenChoice(token_id=18, text="李", prob=0.19), TokenChoice(token_id=5, text="张", prob=0.1)],
        )
        for step, entropy in ((3, 2.9), (7, 4.25))
    ]
    return [
        AlertRecord(
            alert_id="contract-1/entropy",
            kind="entropy",
            severity="warning",
            doc_id="contract-1",
            trace_id=None,
            message="2 decode steps above 2.5 nats (worst 4.250)",
            alarmed_steps=2,
            alarms=alarms,
            worker_id="w1",
            raised_at=now,
        ),
        AlertRecord(
            alert_id="resume-2/processing_failed",
            kind="pipeline",
            severity="critical",
            doc_id="resume-2",
            trace_id="t-2",
            message="the engine raised RuntimeError: boom",
            worker_id="w1",
            raised_at=now,
        ),
    ]


def test_alert_row_shows_the_worst_step() -> None:
    entropy, pipeline = (alert_row(a) for a in _alerts())
    assert entropy.step == "prompt 0 step 7 (+1)"
    assert entropy.entropy == "4.25 > 2.5"
    assert entropy.chosen == "'王' 0.210"
    assert entropy.alternatives == "'李' 0.190 '张' 0.100"
    assert (pipeline.step, pipeline.kind, pipeline.severity) == ("-", "pipeline", "critical")


class _Receiver(BaseHTTPRequestHandler):
    status = 204
    bodies: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.bodies.append((self.headers["Content-Type"], body))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass


def _serve(status: int) -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    bodies: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"status": status, "bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/seqstream", bodies
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    yield from _serve(204)


@pytest.fixture
def broken_webhook() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    yield from _serve(500)


def _alerts_topic(kafka_bootstrap: str) -> tuple[dict[str, str], list[bytes]]:
    env = {
        "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "SEQSTREAM_TOPICS__ALERTS": f"t{uuid.uuid4().hex[:8]}.alerts",
        "SEQSTREAM_TOPICS__PARTITIONS": "1",
        # One development broker: one replica, one in sync (the defaults suit a three-broker cluster).
        "SEQSTREAM_TOPICS__REPLICATION_FACTOR": "1",
        "SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS": "1",
    }
    settings = load_settings(env)
    create_topics(settings)
    values = [msgspec.json.encode(a) for a in _alerts()]
    produce_lines(settings, settings.topics.alerts, values)
    return env, values


@pytest.mark.kafka
def test_alerts_table_and_webhook(kafka_bootstrap, webhook) -> None:
    url, received = webhook
    env, values = _alerts_topic(kafka_bootstrap)
    result = CliRunner().invoke(
        cli,
        ["alerts", "--from-beginning", "--max-messages", "2"],
        env={**env, "SEQSTREAM_ALERTS__WEBHOOK_URL": url},
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split("\t")[:3] == ["raised", "document", "kind"]
    first, second = (line.split("\t") for line in lines[1:3])
    assert first[1:8] == ["contract-1", "entropy", "warning", "prompt 0 step 7 (+1)", "4.25 > 2.5", "'王' 0.210",
                          "'李' 0.190 '张' 0.100"]  # fmt: skip
    assert second[1:4] == ["resume-2", "pipeline", "critical"]
    # Forwarded as published: the same bytes, as JSON, in topic order.
    assert received == [("application/json", v) for v in values]


@pytest.mark.kafka
def test_unreachable_webhook_is_retried_then_reported(kafka_bootstrap, broken_webhook) -> None:
    url, received = broken_webhook
    env, values = _alerts_topic(kafka_bootstrap)
    result = CliRunner().invoke(
        cli,
        ["alerts", "--from-beginning", "--max-messages", "2", "--webhook", url],
        env={**env, "SEQSTREAM_ALERTS__WEBHOOK_ATTEMPTS": "2"},
    )
    # Both alerts are still shown; the command then fails, naming how many were not delivered.
    assert result.exit_code == 1
    assert "2 alerts could not be delivered" in result.output
    assert [body for _, body in received] == [values[0], values[0], values[1], values[1]]
