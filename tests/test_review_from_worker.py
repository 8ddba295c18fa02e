"""The review desk on what the real pipeline sends to review: a tiny BLOOM's review records
(tests/conftest.py, the reference engine) carry their document's text, reach the desk through a
real broker, and two reviewers signed in on one desk hold different documents and send them on."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import msgspec
import pytest
from confluent_kafka import Producer

from ops.demo.samples import sample_documents
from schemas.messages import FieldRecord, ReviewDecision, ReviewRecord
from streams.flow.pipeline import Pipeline
from streams.kafka.clients import client_config
from streams.kafka.inbound import Inbound
from streams.review.queue import Queue
from tests.test_review_desk import committed_records, desk_settings, form_of, poll_until, signed_in

NOW = datetime(2026, 12, 5, tzinfo=UTC)


@pytest.mark.kafka
def test_worker_review_records_are_shown_with_their_text_and_sent_on_by_two_reviewers(
    reference_engine, engine_settings, kafka_bootstrap
) -> None:
    settings = desk_settings(kafka_bootstrap, partitions=2)
    settings.model = engine_settings
    documents = [raw for raw, _ in sample_documents(4, seed=11)]
    batch = [
        Inbound(topic=settings.topics.raw, partition=0, offset=i, key=raw["doc_id"].encode(),
                value=msgspec.json.encode(raw), received_at=NOW, fetched_at=time.monotonic())
        for i, raw in enumerate(documents)
    ]  # fmt: skip
    routed = Pipeline(reference_engine, settings).process_batch(batch).outgoing
    review = [o for o in routed if o.topic == settings.topics.review]
    # A random tiny model vouches for nothing: every document goes to review, with its own text.
    records = [msgspec.json.decode(o.value, type=ReviewRecord) for o in review]
    assert {r.doc_id: r.text for r in records} == {raw["doc_id"]: raw["text"] for raw in documents}

    producer = Producer(client_config(settings))
    for i, o in enumerate(review):  # two lines of two: what two reviewers share
        producer.produce(o.topic, o.value, o.key, partition=i % 2)
    assert producer.flush(10) == 0
    queue = Queue(settings, f"test-{uuid.uuid4().hex[:6]}")
    try:
        poll_until([queue], lambda: queue.depth() == len(review))
        ann, bob = signed_in(settings, queue, "ann"), signed_in(settings, queue, "bob")
        held = {}
        for name, client in (("ann", ann), ("bob", bob)):
            page = client.get("/").text
            doc_id = page.split('<h2 id="doc-id">')[1].split("</h2>")[0]
            held[name] = (doc_id, form_of(page))
        assert held["ann"][0] != held["bob"][0]  # two sessions, two documents
        for name, client in (("ann", ann), ("bob", bob)):
            response = client.post("/decide", data={**held[name][1], "action": "accept"})
            assert response.status_code == 303, response.text
        # The same form again (a second tab, a double click): refused, and said to be decided.
        again = ann.post("/decide", data={**held["ann"][1], "action": "accept"})
        assert again.status_code == 409 and "already decided by ann (accepted)" in again.text
    finally:
        queue.close()

    by_id = {r.doc_id: r for r in records}
    fields = [msgspec.json.decode(v, type=FieldRecord) for v in committed_records(settings, settings.topics.fields)]
    assert sorted((f.doc_id, f.reviewed.reviewer) for f in fields) == sorted(
        (doc_id, name) for name, (doc_id, _) in held.items()
    )
    for f in fields:  # accepted as the model gave them: the worker's spans, now marked reviewed
        assert f.fields == {label: by_id[f.doc_id].fields.get(label, []) for label in f.labels}
        assert f.reviewed.action == "accepted" and f.processing == by_id[f.doc_id].processing
    audit = committed_records(settings, settings.topics.audit)
    decisions = [msgspec.json.decode(v, type=ReviewDecision) for v in audit]
    assert sorted(d.doc_id for d in decisions) == sorted(f.doc_id for f in fields)
