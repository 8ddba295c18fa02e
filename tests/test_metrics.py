"""The worker's /metrics, /healthz and /readyz, scraped from a real `seqstream worker` process."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ops.samples import sample_documents
from streams import metrics
from streams.kafka_io import produce_lines
from streams.topics import create_topics
from tests.worker_process import OutputReader, WorkerProcess, free_port, http_get, isolated_settings

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


@pytest.mark.kafka
def test_worker_exports_every_metric_after_processing(kafka_bootstrap, tiny_model_dir, tmp_path) -> None:
    port = free_port()
    settings, env = isolated_settings(
        kafka_bootstrap, tiny_model_dir, tmp_path / "faust", worker__web_port=str(port), model__max_new_tokens="8"
    )
    t = settings.topics
    create_topics(settings)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    reader = OutputReader(settings)
    worker.start()
    try:
        ready = worker.wait_ready(port)
        assert ready == {"ready": True, "consumer_assigned": True, "model_loaded": True, "broker_reachable": True}
        status, body = http_get(f"http://127.0.0.1:{port}/healthz")
        assert status == 200 and json.loads(body) == {"alive": True}

        submitted = datetime.now(UTC)
        docs = [msgspec.json.encode({**raw, "submitted_at": submitted}) for raw, _ in sample_documents(DOCUMENTS, 31)]
        produce_lines(settings, t.raw, [*docs, b"not json"])
        reader.read_until(
            lambda o: len(o.doc_ids(t.fields, t.review)) >= DOCUMENTS and len(o.records[t.dead_letter]) >= 1,
            timeout_s=180,
            worker=worker,
        )
        out = reader.outputs

        # The lag gauge is refreshed on a timer from committed offsets: wait until it has caught up.
        deadline = time.monotonic() + 60
        while True:
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

        # One observation per decoded document with submitted_at; the malformed message has none.
        assert _value(samples, "seqstream_end_to_end_seconds_count") == DOCUMENTS
        assert _value(samples, "seqstream_end_to_end_seconds_sum") > 0
        assert _value(samples, "seqstream_batch_documents_sum") == DOCUMENTS + 1
        assert _value(samples, "seqstream_input_messages_total") == DOCUMENTS + 1

        written = {o: _value(samples, "seqstream_outputs_total", outcome=o) for o in metrics.OUTCOMES}
        assert written == {
            "fields": len(out.records[t.fields]),
            "review": len(out.records[t.review]),
            "alert": len(out.records[t.alerts]),
            "dead_letter": 1,
        }
        assert written["fields"] + written["review"] == DOCUMENTS

        assert _value(samples, "seqstream_validation_retries_total") == 0
        assert _value(samples, "seqstream_engine_failures_total") == 0
        assert samples["seqstream_gpu_memory_bytes"] == []  # the tests run the model on CPU
        info = _value(samples, "seqstream_model_info", engine="reference", device="cpu", demo="true")
        assert info == 1
        assert _value(samples, "seqstream_ready") == 1
        assert _value(samples, "process_resident_memory_bytes") > 0
    finally:
        worker.stop()
        reader.close()
