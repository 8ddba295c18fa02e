"""The whole pipeline on a real Apache Kafka broker: `seqstream worker` as its own process."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import msgspec
import pytest

from ops.demo.samples import sample_documents
from ops.stress.worker_process import OutputReader, WorkerProcess, isolated_settings, running
from schemas.messages import ErrorCode
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics

pytestmark = pytest.mark.kafka
SIZE_LIMIT = 16 * 1024


def _raw(doc_id: str, **fields) -> bytes:
    base = {"doc_id": doc_id, "text": "乙方：王伟，签约日期2024年3月5日。", "labels": ["乙方", "签约日期"]}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}, ensure_ascii=False).encode()


# Twenty malformed messages, with the dead-letter code each must get.
MALFORMED: list[tuple[bytes, ErrorCode]] = [
    (b"not json at all", ErrorCode.NOT_JSON),
    (b'{"doc_id": "bad-02", "text": ', ErrorCode.NOT_JSON),
    (b"[1, 2, 3]", ErrorCode.NOT_AN_OBJECT),
    (b'"a bare string"', ErrorCode.NOT_AN_OBJECT),
    (_raw("bad-05", text=...), ErrorCode.EMPTY_TEXT),
    (_raw("bad-06", text=""), ErrorCode.EMPTY_TEXT),
    (_raw("bad-07", text=12345), ErrorCode.WRONG_TYPE),
    (_raw("bad-08", labels=..., field_set="astrology"), ErrorCode.UNKNOWN_FIELD_SET),
    (_raw("bad-09", labels=[]), ErrorCode.NO_LABELS),
    (_raw("bad-10", labels=[f"字段{i}" for i in range(65)]), ErrorCode.TOO_MANY_LABELS),
    (_raw("bad-11", labels=["乙\n方"]), ErrorCode.INVALID_LABEL),
    (_raw("bad-12", labels=["乙方:"]), ErrorCode.INVALID_LABEL),
    (_raw("bad-13", labels=["乙方，甲方"]), ErrorCode.INVALID_LABEL),
    (b'{"doc_id": "bad-14", "text": "\xc3\x28 broken", "labels": ["a"]}', ErrorCode.INVALID_UTF8),
    (_raw("bad-15", text="长" * SIZE_LIMIT), ErrorCode.TOO_LARGE),
    (_raw(..., trace_id="bad-16"), ErrorCode.MISSING_FIELD),
    (_raw("bad-17", priority="high"), ErrorCode.UNKNOWN_FIELD),
    (_raw("x" * 200), ErrorCode.INVALID_VALUE),
    (_raw("bad-19", labels="乙方"), ErrorCode.WRONG_TYPE),
    (_raw("bad-20", schema_version=2), ErrorCode.UNSUPPORTED_SCHEMA_VERSION),
]


def _without_processing(record: dict) -> bytes:
    return msgspec.json.encode({k: v for k, v in record.items() if k != "processing"})


@pytest.fixture
def pipeline_env(kafka_bootstrap, tiny_model_dir, tmp_path, request):
    overrides = getattr(request, "param", {})
    settings, env = isolated_settings(
        kafka_bootstrap, tiny_model_dir, tmp_path / "faust", batch__max_document_bytes=str(SIZE_LIMIT), **overrides
    )
    create_topics(settings)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    reader = OutputReader(settings)
    yield settings, worker, reader
    worker.stop()
    reader.close()


def test_two_hundred_documents_twenty_malformed(pipeline_env) -> None:
    settings, worker, reader = pipeline_env
    t = settings.topics
    good = [msgspec.json.encode(raw) for raw, _ in sample_documents(180, seed=21)]
    good_ids = [json.loads(v)["doc_id"] for v in good]
    messages = good + [value for value, _ in MALFORMED]
    random.Random(0).shuffle(messages)
    messages.append(good[0])  # the same doc_id again, later: it must yield an identical record

    worker.start()
    produce_lines(settings, t.raw, messages)
    out = reader.read_until(
        lambda o: (
            len(o.doc_ids(t.fields, t.review)) >= len(good) + 1 and len(o.records[t.dead_letter]) >= len(MALFORMED)
        ),
        timeout_s=300,
        worker=worker,
    )

    counts = Counter(out.doc_ids(t.fields, t.review))
    assert set(counts) == set(good_ids)
    assert all(n == 1 for doc_id, n in counts.items() if doc_id != good_ids[0]), counts.most_common(3)
    repeated = [r for topic in (t.fields, t.review) for r in out.records[topic] if r["doc_id"] == good_ids[0]]
    assert len(repeated) == 2 and _without_processing(repeated[0]) == _without_processing(repeated[1])

    dead = out.records[t.dead_letter]
    assert len(dead) == len(MALFORMED)
    expected_codes = {value: code.value for value, code in MALFORMED}
    for record in dead:
        original = msgspec.json.decode(json.dumps(record["original_value"]).encode(), type=bytes)
        assert record["error_code"] == expected_codes[original], record["message"]
        assert record["source_topic"] == t.raw and record["message"]

    alerted = {a["doc_id"] for a in out.records[t.alerts] if a["kind"] == "entropy"}
    alarmed = {r["doc_id"] for r in out.records[t.review] if any(x["code"] == "entropy_alarm" for x in r["reasons"])}
    assert alarmed and alarmed <= alerted
    for topic in (t.fields, t.review, t.alerts):
        assert all(
            key == record["doc_id"].encode() for key, record in zip(out.keys[topic], out.records[topic], strict=True)
        )


# Longer generations and smaller batches, so that the kill lands while work is left; with a process
# preparing half of every batch beside the worker (model/prepare_pool.py), which must not outlive the kill.
@pytest.mark.parametrize(
    "pipeline_env",
    [
        {
            "model__max_new_tokens": "64",
            "batch__max_documents": "8",
            "model__prepare_processes": "1",
            "model__prepare_share_chars": "1",
        }
    ],
    indirect=True,
)
def test_worker_killed_mid_run_loses_nothing(pipeline_env) -> None:
    settings, worker, reader = pipeline_env
    t = settings.topics
    good = [msgspec.json.encode(raw) for raw, _ in sample_documents(200, seed=22)]
    good_ids = {json.loads(v)["doc_id"] for v in good}

    worker.start()
    produce_lines(settings, t.raw, good)
    reader.read_until(lambda o: len(o.doc_ids(t.fields, t.review)) >= 40, timeout_s=240, worker=worker)
    preparing = worker.descendants()
    assert preparing, "the worker started no preparing process"
    worker.kill()
    deadline = time.monotonic() + 30
    while any(map(running, preparing)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(running, preparing)), "preparing processes outlived their killed worker"
    seen_before_kill = len(reader.outputs.doc_ids(t.fields, t.review))
    assert seen_before_kill < len(good_ids), "the worker finished before it could be killed; raise the load"

    worker.start()
    out = reader.read_until(lambda o: good_ids <= set(o.doc_ids(t.fields, t.review)), timeout_s=300, worker=worker)

    by_id: dict[str, set[bytes]] = {}
    for topic in (t.fields, t.review):
        for record in out.records[topic]:
            by_id.setdefault(record["doc_id"], set()).add(_without_processing(record))
    assert set(by_id) == good_ids
    # Redelivered documents (at-least-once) produced byte-identical records apart from `processing`.
    assert all(len(versions) == 1 for versions in by_id.values())
