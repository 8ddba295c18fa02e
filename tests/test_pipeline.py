"""A micro-batch through decoding, the real engine and routing, without a broker."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import msgspec
import pytest

from model.answers.validate import Extraction
from ops.demo.samples import sample_documents
from schemas.decode import decode_document
from schemas.messages import AlertRecord, DeadLetter, ErrorCode, FieldRecord, Processing, ReviewRecord, Span
from streams import metrics
from streams.flow.batching import Deadline, DeadlineExceeded, Failed, run_isolated
from streams.flow.driver import BatchDriver
from streams.flow.pipeline import Pipeline
from streams.flow.routing import route_extraction
from streams.kafka.inbound import Inbound
from streams.settings import Settings
from tests.poisoned_worker import HangingEngine, PoisonedEngine

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def inbound(value: bytes | None, offset: int) -> Inbound:
    return Inbound(
        topic="raw", partition=0, offset=offset, key=b"k", value=value, received_at=NOW, fetched_at=time.monotonic()
    )


def settings_for(engine_settings) -> Settings:
    return Settings(model=engine_settings)


def test_bisect_isolates_the_failing_item() -> None:
    calls = []

    def run(items):
        calls.append(list(items))
        if 3 in items:
            raise ValueError("boom")
        return [i * 10 for i in items]

    results = run_isolated(run, [0, 1, 2, 3, 4, 5])
    assert results[:3] == [0, 10, 20] and results[4:] == [40, 50]
    assert isinstance(results[3], Failed) and results[3].item == 3


def test_batch_with_bad_input_and_a_poisoned_document(reference_engine, engine_settings) -> None:
    settings = settings_for(engine_settings)
    engine = PoisonedEngine(reference_engine.inner.runner)
    pipeline = Pipeline(engine, settings)
    good = [msgspec.json.encode(raw) for raw, _ in sample_documents(5, seed=11)]
    poison = msgspec.json.encode({"doc_id": "doc-poison", "text": "某某文本", "labels": ["甲方"]})
    batch = [inbound(v, i) for i, v in enumerate([*good[:2], b"not json", poison, *good[2:]])]
    out = pipeline.process_batch(batch).outgoing

    t = settings.topics
    by_topic: dict[str, list[bytes]] = {}
    for o in out:
        by_topic.setdefault(o.topic, []).append(o.value)
    reviewed = [msgspec.json.decode(v, type=ReviewRecord) for v in by_topic[t.review]]
    assert sorted(r.doc_id for r in reviewed) == sorted(raw["doc_id"] for raw, _ in sample_documents(5, seed=11))
    dead = [msgspec.json.decode(v, type=DeadLetter) for v in by_topic[t.dead_letter]]
    assert sorted(((d.offset, d.error_code) for d in dead), key=lambda x: x[0]) == [
        (2, ErrorCode.NOT_JSON),
        (3, ErrorCode.PROCESSING_FAILED),
    ]
    assert next(d for d in dead if d.offset == 2).original_value == b"not json"
    alerts = [msgspec.json.decode(v, type=AlertRecord) for v in by_topic[t.alerts]]
    assert {a.kind for a in alerts} == {"entropy", "pipeline"}
    assert next(a for a in alerts if a.kind == "pipeline").doc_id == "doc-poison"
    assert all(o.key for o in out if o.topic != t.dead_letter)


def test_a_call_past_the_deadline_is_abandoned_and_the_next_waits_for_the_engine() -> None:
    deadline = Deadline(0.2)
    release = threading.Event()
    order: list[str] = []

    def stuck(items):
        release.wait()
        order.append("stuck returned")
        return items

    with pytest.raises(DeadlineExceeded):
        deadline.call(stuck, ["a"])
    threading.Timer(0.5, release.set).start()

    def quick(items):
        order.append("quick ran")
        return items

    # Started while the abandoned call still held the engine: it waits for it, then gets its own clock.
    assert deadline.call(quick, ["b"]) == ["b"]
    assert order == ["stuck returned", "quick ran"]
    assert Deadline(0).call(quick, ["c"]) == ["c"]


def test_a_document_past_the_deadline_is_dead_lettered_and_the_rest_written(reference_engine, engine_settings) -> None:
    settings = settings_for(engine_settings)
    settings.batch.deadline_s = 1.0
    pipeline = Pipeline(HangingEngine(reference_engine.inner.runner), settings)
    good = [raw for raw, _ in sample_documents(3, seed=11)]
    hang = {"doc_id": "doc-hang", "text": "某某文本", "labels": ["甲方"]}
    batch = [inbound(msgspec.json.encode(raw), i) for i, raw in enumerate([good[0], hang, *good[1:]])]
    out = pipeline.process_batch(batch).outgoing

    t = settings.topics
    written = [msgspec.json.decode(o.value)["doc_id"] for o in out if o.topic in (t.fields, t.review)]
    assert sorted(written) == sorted(raw["doc_id"] for raw in good)
    dead = [msgspec.json.decode(o.value, type=DeadLetter) for o in out if o.topic == t.dead_letter]
    assert [(d.offset, d.doc_id, d.error_code) for d in dead] == [(1, "doc-hang", ErrorCode.DEADLINE_EXCEEDED)]
    assert dead[0].original_value == batch[1].value
    alerts = [msgspec.json.decode(o.value, type=AlertRecord) for o in out if o.topic == t.alerts]
    assert [a.alert_id for a in alerts if a.kind == "pipeline"] == ["doc-hang/deadline_exceeded"]


def test_redelivered_document_yields_identical_records_outside_processing(reference_engine, engine_settings) -> None:
    settings = settings_for(engine_settings)
    pipeline = Pipeline(reference_engine, settings)
    value = msgspec.json.encode(next(iter(sample_documents(1, seed=5)))[0])
    first = pipeline.process_batch([inbound(value, 0)]).outgoing
    second = pipeline.process_batch([inbound(value, 99)]).outgoing

    def stable(out):
        return [(o.topic, o.key, msgspec.json.decode(o.value)) for o in out if o.topic != settings.topics.alerts]

    strip = lambda records: [(t, k, {**r, "processing": None}) for t, k, r in records]  # noqa: E731
    assert strip(stable(first)) == strip(stable(second))


def test_confident_grounded_extraction_goes_to_fields(reference_engine, engine_settings) -> None:
    settings = settings_for(engine_settings)
    doc = next(iter(sample_documents(1)))[0]
    document = decode_document(msgspec.json.encode(doc), 1 << 20)
    label = document.labels[0]
    extraction = Extraction(
        doc_id=document.doc_id,
        fields={label: [Span(text=document.text[:2], start=0, end=2, confidence=0.99, margin=0.98)]},
    )
    processing = msgspec.json.decode(
        b'{"worker_id":"w","source_topic":"raw","partition":0,"offset":1,"received_at":"2026-12-02T00:00:00Z",'
        b'"completed_at":"2026-12-02T00:00:01Z","batch_size":1,"timings":{}}',
        type=Processing,
    )
    [out] = route_extraction(document, extraction, reference_engine.info, processing, settings.topics)
    assert out.topic == settings.topics.fields and out.key == document.doc_id.encode()
    record = msgspec.json.decode(out.value, type=FieldRecord)
    assert record.fields[label][0].text == document.text[:2] and record.model.engine == "reference"


def test_the_pipeline_returns_what_it_measured_and_the_driver_reports_it(reference_engine, engine_settings) -> None:
    settings = settings_for(engine_settings)
    driver = BatchDriver(Pipeline(reference_engine, settings), settings.topics)
    good = msgspec.json.encode(next(iter(sample_documents(1, seed=5)))[0])
    # Fetched two seconds before its batch started: its queue time, whichever driver fetched it.
    first = Inbound("raw", 0, 0, b"k", good, NOW, time.monotonic() - 2.0)
    bad = Inbound("raw", 0, 1, b"k", b"not json", NOW, time.monotonic())
    tokens_before = metrics.REGISTRY.get_sample_value("seqstream_generated_tokens_total")
    queued_before = metrics.REGISTRY.get_sample_value("seqstream_stage_seconds_count", {"stage": "queue"})

    processed = driver.finish(driver.take([first, bad]), 0.0)

    measured = processed.measured
    assert measured.documents == 2 and len(measured.queue_s) == 1 and measured.queue_s[0] >= 2.0
    assert measured.generated_tokens > 0 and measured.model_timings is not None and measured.serialise_s is not None
    t = settings.topics
    [record] = [msgspec.json.decode(o.value) for o in processed.outgoing if o.topic in (t.fields, t.review)]
    assert record["processing"]["timings"]["queue_ms"] == measured.queue_s[0] * 1000
    tokens_after = metrics.REGISTRY.get_sample_value("seqstream_generated_tokens_total")
    assert tokens_after - tokens_before == measured.generated_tokens
    queued_after = metrics.REGISTRY.get_sample_value("seqstream_stage_seconds_count", {"stage": "queue"})
    assert queued_after - queued_before == 1


def test_batches_taken_ahead_on_another_thread_give_the_serial_records(reference_engine, engine_settings) -> None:
    """The product engine (windows around the extractor) prepares: batch t+1 taken on a thread while
    batch t runs yields the records of batches processed one after the other (determinism)."""
    from concurrent.futures import ThreadPoolExecutor

    from model import PreparingEngine

    assert isinstance(reference_engine, PreparingEngine)
    settings = settings_for(engine_settings)
    pipeline = Pipeline(reference_engine, settings)
    raws = [msgspec.json.encode(raw) for raw, _ in sample_documents(9, seed=21)]
    batches = [[inbound(v, 3 * b + i) for i, v in enumerate(raws[3 * b : 3 * b + 3])] for b in range(3)]
    batches[1].insert(1, inbound(b"not json", 99))

    def stable(out) -> list:
        # Where and when a record was made (`processing`, an alert's `raised_at`) differs by run.
        return [(o.topic, o.key, {**msgspec.json.decode(o.value), "processing": None, "raised_at": None}) for o in out]

    serial = [stable(pipeline.process_batch(b).outgoing) for b in batches]
    ahead_records = []
    with ThreadPoolExecutor(max_workers=1) as ahead:
        pending = ahead.submit(pipeline.take, batches[0])
        for following in [*batches[1:], None]:
            taken = pending.result()
            assert taken.prepared is not None
            if following is not None:
                pending = ahead.submit(pipeline.take, following)
            ahead_records.append(stable(pipeline.finish(taken).outgoing))
    assert ahead_records == serial
    assert any(topic == settings.topics.dead_letter for topic, _, _ in ahead_records[1])


def test_the_look_ahead_is_taken_late_after_a_partial_batch_and_at_once_after_a_full_one(
    reference_engine, engine_settings
) -> None:
    """At low load the next batch is taken as late as its preparation allows (it then holds what
    arrived while the model ran), after a full batch at once; before any batch, at once."""
    from streams.flow.driver import PREPARE_LEAD

    settings = settings_for(engine_settings)
    driver = BatchDriver(Pipeline(reference_engine, settings), settings.topics)
    assert driver.look_ahead_s(3) == 0.0
    raws = [msgspec.json.encode(raw) for raw, _ in sample_documents(3, seed=5)]
    driver.finish(driver.take([inbound(v, i) for i, v in enumerate(raws)]), 0.0)
    assert driver.take_s > 0 and driver.finish_s > 0
    assert driver.look_ahead_s(4) == max(0.0, driver.finish_s - PREPARE_LEAD * driver.take_s)
    assert driver.look_ahead_s(3) == 0.0
