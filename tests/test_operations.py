"""Operations on a real `seqstream worker` process: /metrics, /healthz, /readyz and the audit trail."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from model.answers.prompt import chunk_labels
from ops.demo.samples import sample_documents
from ops.stress.worker_process import OutputReader, Outputs, WorkerProcess, free_port, http_get, isolated_settings
from schemas.messages import AuditRecord
from streams import metrics
from streams.cli.main import cli
from streams.kafka.clients import consume, produce_lines
from streams.kafka.topics import create_topics
from streams.settings import Settings

DOCUMENTS = 8


def _scrape(port: int) -> dict[str, list]:
    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(body.decode()):
        samples.setdefault(family.name, [])
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def _value(samples: dict[str, list], name: str, **labels: str) -> float:
    matching = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matching) == 1, (name, labels, samples.get(name))
    return matching[0]


@dataclass
class ProcessedRun:
    settings: Settings
    port: int
    outputs: Outputs
    worker: WorkerProcess


@pytest.fixture(scope="module")
def processed(kafka_bootstrap, tiny_model_dir, tmp_path_factory) -> Iterator[ProcessedRun]:
    """One worker, audit trail on, that has processed DOCUMENTS documents and one malformed message."""
    tmp_path = tmp_path_factory.mktemp("operations")
    port = free_port()
    settings, env = isolated_settings(
        kafka_bootstrap,
        tiny_model_dir,
        tmp_path / "faust",
        worker__web_port=str(port),
        worker__audit="true",
        model__max_new_tokens="8",
    )
    t = settings.topics
    create_topics(settings)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    reader = OutputReader(settings)
    worker.start()
    try:
        ready = worker.wait_ready(port)
        assert ready == {"ready": True, "consumer_assigned": True, "model_loaded": True, "broker_reachable": True}
        submitted = datetime.now(UTC)
        docs = [msgspec.json.encode({**raw, "submitted_at": submitted}) for raw, _ in sample_documents(DOCUMENTS, 31)]
        produce_lines(settings, t.raw, [*docs, b"not json"])
        out = reader.read_until(
            lambda o: len(o.doc_ids(t.fields, t.review)) >= DOCUMENTS and len(o.records[t.dead_letter]) >= 1,
            timeout_s=180,
            worker=worker,
        )
        yield ProcessedRun(settings, port, out, worker)
    finally:
        worker.stop()
        reader.close()


@pytest.mark.kafka
def test_health_endpoints(processed: ProcessedRun) -> None:
    status, body = http_get(f"http://127.0.0.1:{processed.port}/healthz")
    assert status == 200 and json.loads(body) == {"alive": True}
    status, body = http_get(f"http://127.0.0.1:{processed.port}/readyz")
    assert status == 200 and json.loads(body)["ready"] is True


@pytest.mark.kafka
def test_worker_exports_every_metric_after_processing(processed: ProcessedRun) -> None:
    port, out, t = processed.port, processed.outputs, processed.settings.topics
    # The lag gauge is refreshed on a timer from committed offsets: wait until it has caught up.
    deadline = time.monotonic() + 60
    while True:
        processed.worker.assert_alive()
        samples = _scrape(port)
        lag = samples.get("seqstream_consumer_lag", [])
        if (len(lag) == 3 and all(s.value == 0 for s in lag)) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert sorted(int(s.labels["partition"]) for s in lag) == [0, 1, 2], lag
    assert all(s.labels["topic"] == t.raw and s.value == 0 for s in lag), lag

    # Every metric the module defines is in the scrape (GPU memory as a family without samples on CPU).
    # (The text format names an info family by its series, `..._info`.)
    defined = {f.name + ("_info" if f.type == "info" else "") for f in metrics.REGISTRY.collect()}
    assert defined <= set(samples), defined - set(samples)

    for stage in metrics.STAGES:
        count = _value(samples, "seqstream_stage_seconds_count", stage=stage)
        total = _value(samples, "seqstream_stage_seconds_sum", stage=stage)
        assert count >= 1 and total >= 0, stage
        # Queue wait is per document, the other stages per batch.
        if stage == "queue":
            assert count == DOCUMENTS
    assert _value(samples, "seqstream_stage_seconds_sum", stage="decode") > 0
    assert _value(samples, "seqstream_stage_seconds_sum", stage="prefill") > 0

    # One observation per result record: the documents from their submitted_at, the malformed
    # message (no submitted_at to read) from its Kafka timestamp.
    assert _value(samples, "seqstream_end_to_end_seconds_count", start="submitted_at") == DOCUMENTS
    assert _value(samples, "seqstream_end_to_end_seconds_sum", start="submitted_at") > 0
    assert _value(samples, "seqstream_end_to_end_seconds_count", start="kafka_timestamp") == 1
    assert _value(samples, "seqstream_batch_documents_sum") == DOCUMENTS + 1
    assert _value(samples, "seqstream_input_messages_total") == DOCUMENTS + 1

    written = {o: _value(samples, "seqstream_outputs_total", outcome=o) for o in metrics.OUTCOMES}
    assert written == {
        "fields": len(out.records[t.fields]),
        "review": len(out.records[t.review]),
        "alert": len(out.records[t.alerts]),
        "dead_letter": 1,
        "audit": DOCUMENTS,
    }
    assert written["fields"] + written["review"] == DOCUMENTS

    assert _value(samples, "seqstream_validation_retries_total") == 0
    assert _value(samples, "seqstream_engine_failures_total") == 0
    assert samples["seqstream_gpu_memory_bytes"] == []  # the tests run the model on CPU
    engine = processed.settings.model.engine
    info = _value(samples, "seqstream_model_info", engine=engine, device="cpu", demo="true")
    assert info == 1
    assert _value(samples, "seqstream_ready") == 1
    assert _value(samples, "process_resident_memory_bytes") > 0


@pytest.mark.kafka
def test_audit_trail_matches_the_records_it_explains(processed: ProcessedRun) -> None:
    settings, out = processed.settings, processed.outputs
    t = settings.topics
    traces = {
        m.key().decode(): msgspec.json.decode(m.value(), type=AuditRecord)
        for m in consume(settings, [t.audit], idle_timeout=3)
    }
    records = {r["doc_id"]: r for topic in (t.fields, t.review) for r in out.records[topic]}
    assert set(traces) == set(records)
    alarms_checked = 0
    for doc_id, trace in traces.items():
        record = records[doc_id]
        assert trace.processing.offset == record["processing"]["offset"]
        assert [p.labels for p in trace.prompts] == [list(c) for c in _chunks(record["labels"])]
        for prompt in trace.prompts:
            assert 1 <= len(prompt.tokens) <= 8
            for token in prompt.tokens:
                # Greedy: the chosen token is the most likely one, so its margin is never negative.
                assert 0 <= token.margin <= token.prob <= 1 and token.entropy_nats >= 0
                # A forced step had one legal token.
                assert token.prob == 1.0 or not token.forced
        # The alert's alarms are steps of this very trace.
        for alert in (a for a in out.records[t.alerts] if a["doc_id"] == doc_id):
            for alarm in alert["alarms"]:
                step = trace.prompts[alarm["chunk"]].tokens[alarm["step"]]
                assert step.token_id == alarm["chosen"]["token_id"]
                assert step.entropy_nats == pytest.approx(alarm["entropy_nats"])
                alarms_checked += 1
    assert alarms_checked > 0

    doc_id = sorted(traces)[0]
    env = {
        "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
        "SEQSTREAM_TOPICS__AUDIT": t.audit,
    }
    result = CliRunner().invoke(cli, ["audit", doc_id, "--idle-timeout", "3"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"audit trail of {doc_id} ")
    steps = sum(len(p.tokens) for p in traces[doc_id].prompts)
    assert len(lines) == 1 + 2 * len(traces[doc_id].prompts) + steps
    missing = CliRunner().invoke(cli, ["audit", "no-such-doc", "--idle-timeout", "3"], env=env)
    assert missing.exit_code == 1 and "no audit record" in missing.output


def _chunks(labels: list[str], size: int = 6) -> list[list[str]]:
    return [list(c) for c in chunk_labels(labels, size)]
