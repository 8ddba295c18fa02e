"""Hostile input: whatever lands on the raw topic, the worker neither crashes nor drops it.

Unit level: hypothesis batches of hostile messages through `Pipeline.process_batch` with the real
tiny engine (every message -> exactly one field, review or dead-letter record, never an exception).
End to end: 320 seeded hostile messages through the real broker and `seqstream worker`.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ops.stress.hostile import hostile_messages, seeded_hostile_messages
from ops.stress.worker_process import OutputReader, WorkerProcess, isolated_settings, report
from schemas.decode import salvage_doc_id
from streams.flow.pipeline import Pipeline
from streams.kafka.clients import produce_lines
from streams.kafka.inbound import Inbound
from streams.kafka.topics import create_topics
from streams.settings import BatchSettings, Settings

LIMIT = 16 * 1024
NOW = datetime(2026, 12, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def pipeline(reference_engine, engine_settings) -> Pipeline:
    return Pipeline(reference_engine, Settings(model=engine_settings, batch=BatchSettings(max_document_bytes=LIMIT)))


def _result_offsets(pipeline: Pipeline, out) -> Counter[int]:
    """Offsets answered by a result record (alerts come on top and answer nothing alone)."""
    t = pipeline.settings.topics
    offsets: Counter[int] = Counter()
    for o in out:
        record = msgspec.json.decode(o.value)  # every output is valid JSON (and so valid UTF-8)
        if o.topic == t.dead_letter:
            offsets[record["offset"]] += 1
        elif o.topic in (t.fields, t.review):
            offsets[record["processing"]["offset"]] += 1
            assert o.key == record["doc_id"].encode()
        else:
            assert o.topic == t.alerts, o.topic
    return offsets


@hypothesis_settings(
    derandomize=True,  # the same examples on every run: a failure here reproduces
    deadline=None,  # the engine runs on a shared CPU; speed is not under test
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(values=st.lists(hostile_messages(LIMIT), min_size=1, max_size=6))
def test_every_hostile_message_gets_exactly_one_result(pipeline: Pipeline, values: list[bytes]) -> None:
    batch = [Inbound("raw", 0, i, b"k", v, NOW, time.monotonic()) for i, v in enumerate(values)]
    out = pipeline.process_batch(batch).outgoing
    assert _result_offsets(pipeline, out) == Counter(range(len(values)))
    for o in out:
        if o.topic == pipeline.settings.topics.dead_letter:
            record = msgspec.json.decode(o.value)
            assert base64.b64decode(record["original_value"]) == values[record["offset"]]


def test_json_nested_thousands_deep_is_a_dead_letter_not_a_crash(pipeline: Pipeline) -> None:
    deep = b'{"doc_id": "deep", "text": "t", "metadata": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    values = [deep, b"[" * 50_000]
    out = pipeline.process_batch([Inbound("raw", 0, i, None, v, NOW, time.monotonic()) for i, v in enumerate(values)])
    assert [o.topic for o in out.outgoing] == [pipeline.settings.topics.dead_letter] * 2


@pytest.mark.kafka
def test_hostile_messages_end_to_end(kafka_bootstrap, tiny_model_dir, tmp_path) -> None:
    settings, env = isolated_settings(
        kafka_bootstrap, tiny_model_dir, tmp_path / "faust", batch__max_document_bytes=str(LIMIT)
    )
    t = settings.topics
    create_topics(settings)
    messages = seeded_hostile_messages(320, seed=66, limit=LIMIT)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    reader = OutputReader(settings)
    try:
        worker.start()
        assert produce_lines(settings, t.raw, messages) == len(messages)
        out = reader.read_until(lambda o: len(o.results(settings)) >= len(messages), timeout_s=400, worker=worker)
        worker.assert_alive()
    finally:
        worker.stop()
        reader.close()

    dead = Counter(base64.b64decode(r["original_value"]) for r in out.records[t.dead_letter])
    answered = Counter(r["doc_id"] for topic in (t.fields, t.review) for r in out.records[topic])
    unaccounted = [m for m in messages if not dead[m] and not answered[salvage_doc_id(m)]]
    log = worker.log_path.read_text(errors="replace")
    report(
        "hostile-input",
        sent=len(messages),
        dead_letters=sum(dead.values()),
        extracted=sum(answered.values()),
        unaccounted=len(unaccounted),
        codes=dict(Counter(r["error_code"] for r in out.records[t.dead_letter]).most_common()),
    )
    assert not unaccounted, [m[:80] for m in unaccounted[:5]]
    assert sum(dead.values()) + sum(answered.values()) == len(messages), "a message was answered twice"
    assert "Traceback" not in log, log[log.index("Traceback") - 200 :][:3000]
