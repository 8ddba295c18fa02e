"""The review desk (streams/review/) on a real broker: sign-in, CSRF, escaping, decisions as one
transaction each, two reviewers, and a desk killed mid-decision."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from starlette.testclient import TestClient

from schemas.field_sets import FIELD_SETS
from schemas.messages import (
    Candidate,
    DecodeSettings,
    FieldRecord,
    ModelInfo,
    Processing,
    ReviewCode,
    ReviewDecision,
    ReviewReason,
    ReviewRecord,
    Span,
    Timings,
)
from streams.cli.show import DECISION_PREFIX
from streams.kafka.clients import client_config
from streams.kafka.topics import create_topics
from streams.review.app import chosen_spans, desk_app
from streams.review.decision import Choice, DecisionError, Position, decide
from streams.review.page import segments
from streams.review.queue import BUFFERED_MAX, NotYours, Queue
from streams.review.serve import read_queue
from streams.settings import Settings, load_settings

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
SECRET = "desk-test-secret"
MODEL = ModelInfo(
    name="tiny", engine="fast", attention="eager", dtype="float32", device="cpu", demo=True,
    decode=DecodeSettings(
        max_new_tokens=24, max_input_tokens=1024, labels_per_prompt=6, confidence_threshold=0.85, entropy_threshold=2.5
    ),
)  # fmt: skip
DYING_DESK = Path(__file__).with_name("dying_review_desk.py")


def review_record(doc_id: str, party: str = "上海恒达物流有限公司", extra: str = "") -> ReviewRecord:
    """A review record as a worker writes it: 甲方 found, 乙方 answered None and offered by the backoff."""
    text = f"甲方：{party}。乙方：王伟。签约日期：2024年3月5日。{extra}"
    a, b = text.index(party), text.index("王伟")
    labels = list(FIELD_SETS["contract"])
    return ReviewRecord(
        doc_id=doc_id, task="extract", labels=labels,
        fields={"甲方": [Span(text=party, start=a, end=a + len(party), confidence=0.6, margin=0.1)]},
        classes=[], model=MODEL, source="test", submitted_at=NOW, trace_id=None, metadata={},
        processing=Processing(
            worker_id="w", source_topic="raw", partition=0, offset=0, received_at=NOW, completed_at=NOW,
            batch_size=1, timings=Timings(),
        ),
        reasons=[
            ReviewReason(code=ReviewCode.LOW_CONFIDENCE, detail="0.60 < 0.85", label="甲方", value=party),
            ReviewReason(code=ReviewCode.LEXICON_BACKOFF, detail="picked", label="乙方", value="王伟"),
        ],
        candidates={"乙方": [Candidate(text="王伟", start=b, end=b + 2, score=0.9, source="lac:PER", picked=True)]},
        text=text,
    )  # fmt: skip


# -- pure: what a decision becomes ------------------------------------------------------------------


def test_accepting_unchanged_keeps_the_values_and_marks_the_record_reviewed() -> None:
    record = review_record("d1")
    at = Position("review", 1, 7)
    fields, decision = decide(record, at, Choice(reviewer="ann", action="accept", spans={}), NOW)
    assert fields is not None and fields.reviewed is not None
    assert (fields.reviewed.action, fields.reviewed.reviewer, fields.reviewed.review_offset) == ("accepted", "ann", 7)
    assert fields.fields["甲方"] == record.fields["甲方"] and fields.fields["乙方"] == []
    assert (decision.action, decision.changed) == ("accepted", [])
    assert type(fields) is FieldRecord  # the fields schema, not a review record with its reasons


def test_a_set_value_is_read_from_the_text_at_its_offsets() -> None:
    record = review_record("d1")
    b = record.text.index("王伟")
    fields, decision = decide(record, Position("r", 0, 0), Choice("ann", "accept", {"乙方": [(b, b + 2)]}), NOW)
    assert fields.fields["乙方"][0].text == "王伟" and decision.action == "corrected" and decision.changed == ["乙方"]


@pytest.mark.parametrize(
    ("spans", "message"),
    [({"乙方": [(5, 500)]}, "not a span"), ({"乙方": [(3, 3)]}, "not a span"), ({"星座": [(0, 2)]}, "not one of")],
)
def test_a_value_that_is_not_a_span_of_the_text_is_refused(spans, message) -> None:
    with pytest.raises(DecisionError, match=message):
        decide(review_record("d1"), Position("r", 0, 0), Choice("ann", "accept", spans), NOW)


def test_a_record_written_before_review_records_carried_text_can_be_accepted_or_cleared_not_set() -> None:
    record = msgspec.structs.replace(review_record("old"), text=None)
    fields, _ = decide(record, Position("r", 0, 0), Choice("ann", "accept", {"甲方": []}), NOW)
    assert fields.fields["甲方"] == [] and fields.reviewed.action == "corrected"
    with pytest.raises(DecisionError, match="no text"):
        decide(record, Position("r", 0, 0), Choice("ann", "accept", {"乙方": [(0, 2)]}), NOW)


def test_a_rejection_needs_a_reason_and_sends_nothing_to_fields() -> None:
    with pytest.raises(DecisionError, match="reason"):
        decide(review_record("d1"), Position("r", 0, 0), Choice("ann", "reject", {}), NOW)
    fields, decision = decide(review_record("d1"), Position("r", 0, 0), Choice("ann", "reject", {}, "spam"), NOW)
    assert fields is None and (decision.action, decision.reason) == ("rejected", "spam")


def test_the_page_shows_every_character_once_with_the_values_marked() -> None:
    record = review_record("d1")
    pieces = segments(record.text, record.fields, {"甲方": "#fff"})
    assert "".join(p.text for p in pieces) == record.text
    assert [p.label for p in pieces if p.label] == ["甲方"]
    assert all(record.text[p.start : p.start + len(p.text)] == p.text for p in pieces)


def test_the_form_names_spans_none_and_kept_labels() -> None:
    form = {"label-0": "甲方", "choice-0": "keep", "label-1": "乙方", "choice-1": "9-11", "label-2": "签约日期"}
    form |= {"choice-2": "none", "label-3": "合同金额", "choice-3": "custom", "custom-3": "0-2"}
    assert chosen_spans(form) == {"乙方": [(9, 11)], "签约日期": [], "合同金额": [(0, 2)]}


# -- on the broker ------------------------------------------------------------------------------------


def desk_settings(bootstrap: str, partitions: int = 3) -> Settings:
    run = uuid.uuid4().hex[:8]
    env = {
        "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        **{f"SEQSTREAM_TOPICS__{t.upper()}": f"d{run}.{t}" for t in ("raw", "fields", "review", "alerts", "audit")},
        "SEQSTREAM_TOPICS__DEAD_LETTER": f"d{run}.dead-letter",
        "SEQSTREAM_TOPICS__PARTITIONS": str(partitions),
        "SEQSTREAM_TOPICS__REPLICATION_FACTOR": "1",
        "SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS": "1",
        "SEQSTREAM_REVIEW__SECRET": SECRET,
        "SEQSTREAM_REVIEW__GROUP_ID": f"desk-{run}",
    }
    settings = load_settings(env)
    create_topics(settings)
    return settings


def publish(settings: Settings, records: list[ReviewRecord], partition: int | None = None) -> None:
    producer = Producer(client_config(settings))
    for r in records:
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(settings.topics.review, msgspec.json.encode(r), r.doc_id.encode(), **kwargs)
    assert producer.flush(10) == 0


def poll_until(queues: list[Queue], done, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"desk queue never got there: depths {[q.depth() for q in queues]}"
        for q in queues:
            q.poll(0.2)


def committed_records(settings: Settings, topic: str) -> list[bytes]:
    consumer = Consumer(
        {**client_config(settings), "group.id": f"check-{uuid.uuid4()}", "auto.offset.reset": "earliest"}
        | {"isolation.level": "read_committed", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    values, idle = [], time.monotonic()
    while time.monotonic() - idle < 4:
        message = consumer.poll(0.3)
        if message is not None and message.error() is None:
            values.append(message.value())
            idle = time.monotonic()
    consumer.close()
    return values


@pytest.fixture
def desk(kafka_bootstrap):
    settings = desk_settings(kafka_bootstrap)
    queue = Queue(settings, f"test-{uuid.uuid4().hex[:6]}")
    yield settings, queue
    queue.close()


def signed_in(settings: Settings, queue: Queue, name: str) -> TestClient:
    client = TestClient(desk_app(settings.review, queue), follow_redirects=False)
    page = client.get("/signin").text
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    assert client.post("/signin", data={"csrf": csrf, "reviewer": name, "secret": SECRET}).status_code == 303
    return client


def form_of(page: str) -> dict[str, str]:
    """The decision form's hidden inputs (csrf, topic, partition, offset, label-N)."""
    fields = {}
    for part in page.split('<input type="hidden" name="')[1:]:
        name, rest = part.split('"', 1)
        fields[name] = rest.split('value="', 1)[1].split('"', 1)[0]
    return fields


@pytest.mark.kafka
def test_nothing_is_shown_or_decided_without_signing_in_and_a_csrf_token(desk) -> None:
    settings, queue = desk
    publish(settings, [review_record("s1")])
    poll_until([queue], lambda: queue.depth() == 1)
    client = TestClient(desk_app(settings.review, queue), follow_redirects=False)
    assert client.get("/").headers["location"] == "/signin"
    assert client.post("/decide", data={"action": "accept"}).status_code == 401
    assert client.post("/signin", data={"reviewer": "eve", "secret": SECRET}).status_code == 403  # no token
    csrf = form_of(client.get("/signin").text)["csrf"]
    assert client.post("/signin", data={"csrf": csrf, "reviewer": "eve", "secret": "guess"}).status_code == 401
    ann = signed_in(settings, queue, "ann")
    form = form_of(ann.get("/").text)
    assert ann.post("/decide", data={**form, "csrf": "forged", "action": "accept"}).status_code == 403
    assert queue.depth() == 1 and committed_records(settings, settings.topics.fields) == []
    with pytest.raises(ValueError, match="secret"):
        desk_app(load_settings({}).review, queue)


@pytest.mark.kafka
def test_a_document_holding_markup_is_shown_as_text(desk) -> None:
    settings, queue = desk
    publish(settings, [review_record("x1", extra="<script>alert('owned')</script><b>bold</b>")])
    poll_until([queue], lambda: queue.depth() == 1)
    page = signed_in(settings, queue, "ann").get("/").text
    assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;" in page
    assert "<script>alert" not in page and "<b>bold" not in page


@pytest.mark.kafka
def test_accept_correct_and_reject_reach_fields_and_audit_once_each(desk) -> None:
    settings, queue = desk
    records = [review_record("a1"), review_record("c1"), review_record("r1")]
    publish(settings, records, partition=0)  # one line, worked in order
    poll_until([queue], lambda: queue.depth() == 3)
    ann = signed_in(settings, queue, "ann")
    b = records[1].text.index("王伟")
    choices = [
        {"action": "accept", "choice-1": f"{b}-{b + 2}"},  # the backoff's candidate, one click
        {"action": "accept", "choice-1": "custom", "custom-1": f"{b}-{b + 2}", "choice-0": "none"},
        {"action": "reject", "reason": "not a contract"},
    ]
    for doc_id, choice in zip(["a1", "c1", "r1"], choices, strict=True):
        page = ann.get("/").text
        assert f'<h2 id="doc-id">{doc_id}</h2>' in page
        response = ann.post("/decide", data={**form_of(page), **choice})
        assert response.status_code == 303, response.text
    empty = ann.get("/").text
    assert 'id="empty"' in empty and '<meta http-equiv="refresh"' in empty  # it looks again by itself
    scraped = ann.get("/metrics").text  # the desk's own /metrics: what the Grafana panel and the alert read
    assert f'seqstream_review_backlog{{partition="0",topic="{settings.topics.review}"}} 0.0' in scraped
    assert 'seqstream_review_decisions_total{action="rejected"}' in scraped
    assert "seqstream_review_decision_seconds_count" in scraped
    fields = [msgspec.json.decode(v, type=FieldRecord) for v in committed_records(settings, settings.topics.fields)]
    assert sorted(f.doc_id for f in fields) == ["a1", "c1"]
    by_id = {f.doc_id: f for f in fields}
    assert [s.text for s in by_id["a1"].fields["乙方"]] == ["王伟"] and by_id["a1"].reviewed.action == "corrected"
    assert by_id["c1"].fields["甲方"] == [] and by_id["c1"].reviewed.reviewer == "ann"
    audit = committed_records(settings, settings.topics.audit)
    assert all(v.startswith(DECISION_PREFIX) for v in audit)
    decisions = [msgspec.json.decode(v, type=ReviewDecision) for v in audit]
    assert sorted((d.doc_id, d.action) for d in decisions) == [
        ("a1", "corrected"),
        ("c1", "corrected"),
        ("r1", "rejected"),
    ]
    assert committed_offset(settings, 0) == 3


def committed_offset(settings: Settings, partition: int) -> int:
    consumer = Consumer({**client_config(settings), "group.id": settings.review.group_id})
    [tp] = consumer.committed([TopicPartition(settings.topics.review, partition)], timeout=10)
    consumer.close()
    return tp.offset


@pytest.mark.kafka
def test_two_reviewers_never_hold_the_same_document(desk, kafka_bootstrap) -> None:
    settings, queue = desk
    publish(settings, [review_record(f"t{p}") for p in range(3)], partition=None)
    for p in range(3):
        publish(settings, [review_record(f"p{p}")], partition=p)
    poll_until([queue], lambda: queue.depth() == 6)
    held = [queue.next_for(name) for name in ("ann", "bob", "cy", "dee")]
    shown = [(w.at.partition, w.at.offset) for w in held if w is not None]
    assert len(shown) == 3 and len(set(shown)) == 3 and held[3] is None  # a line per partition, one each
    assert queue.next_for("ann") is held[0]  # a reload shows the same record
    with pytest.raises(NotYours):
        queue.decide(held[0].at, Choice("bob", "accept", {}))
    # A second desk in the group takes partitions of its own: what it shows, the first no longer does.
    second = Queue(settings, f"test-{uuid.uuid4().hex[:6]}")
    try:
        poll_until([queue, second], lambda: second.shelves and len(queue.shelves) + len(second.shelves) == 3)
        assert not set(queue.shelves) & set(second.shelves)
    finally:
        second.close()


@pytest.mark.kafka
def test_a_desk_killed_mid_decision_loses_and_duplicates_nothing(kafka_bootstrap, tmp_path) -> None:
    settings = desk_settings(kafka_bootstrap, partitions=1)
    publish(settings, [review_record("k1"), review_record("k2")])
    env = {**os.environ, "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap}
    env |= {f"SEQSTREAM_TOPICS__{t.upper()}": getattr(settings.topics, t) for t in ("fields", "review", "audit")}
    env |= {"SEQSTREAM_REVIEW__SECRET": SECRET, "SEQSTREAM_REVIEW__GROUP_ID": settings.review.group_id}
    dying = subprocess.run([sys.executable, str(DYING_DESK), "killed"], env=env, capture_output=True, timeout=120)
    assert dying.returncode == 9, dying.stderr.decode()[-2000:]  # it died inside its transaction
    queue = Queue(settings, "killed")  # the same desk, restarted: it fences the open transaction
    try:
        poll_until([queue], lambda: queue.depth() == 2)
        head = queue.next_for("ann")
        assert head.record.doc_id == "k1"  # shown again: the dead desk's decision never happened
        queue.decide(head.at, Choice("ann", "accept", {}))
    finally:
        queue.close()
    written = committed_records(settings, settings.topics.fields)
    fields = [msgspec.json.decode(v, type=FieldRecord).doc_id for v in written]
    audit = committed_records(settings, settings.topics.audit)
    assert fields == ["k1"] and len(audit) == 1 and committed_offset(settings, 0) == 1


@pytest.mark.kafka
def test_a_desk_fenced_by_its_own_instance_rejoins_with_its_records(kafka_bootstrap) -> None:
    """What a broker away longer than the session does to a static member: its old member id is
    fenced by its own instance, which librdkafka makes fatal. A consumer joining under the desk's
    instance does the same here; the desk must rejoin and go on, not poll a dead consumer forever."""
    settings = desk_settings(kafka_bootstrap, partitions=1)
    publish(settings, [review_record("f1"), review_record("f2")])
    queue = Queue(settings, f"test-{uuid.uuid4().hex[:6]}")
    intruder = Consumer(
        {**client_config(settings), "group.id": settings.review.group_id}
        | {"group.instance.id": f"seqstream-review-{queue.instance}", "enable.auto.commit": False}
    )
    try:
        poll_until([queue], lambda: queue.depth() == 2)
        first = queue.consumer
        queue.decide(queue.next_for("ann").at, Choice("ann", "accept", {}))
        intruder.subscribe([settings.topics.review])
        deadline = time.monotonic() + 60
        while queue.consumer is first:
            assert time.monotonic() < deadline, "the fenced desk never replaced its consumer"
            intruder.poll(0.2)
            queue.poll(0.2)
        poll_until([queue], lambda: queue.depth() == 1)  # from the committed offset: f2 only
        head = queue.next_for("ann")
        assert head.record.doc_id == "f2"
        queue.decide(head.at, Choice("ann", "accept", {}))  # the new consumer's group metadata commits
    finally:
        with contextlib.suppress(KafkaException, RuntimeError):
            intruder.close()
        queue.close()
    written = committed_records(settings, settings.topics.fields)
    assert [msgspec.json.decode(v, type=FieldRecord).doc_id for v in written] == ["f1", "f2"]
    assert committed_offset(settings, 0) == 2


@pytest.mark.kafka
def test_a_superseded_or_already_decided_document_says_so(desk) -> None:
    settings, queue = desk
    old, new = review_record("v1"), review_record("v1", party="北京远通科技有限公司")
    publish(settings, [old, new], partition=0)
    poll_until([queue], lambda: queue.depth() == 2)
    ann = signed_in(settings, queue, "ann")
    page = ann.get("/").text
    assert 'id="superseded"' in page and "上海恒达物流有限公司" in page and 'id="decided-before"' not in page
    first = form_of(page)
    assert ann.post("/decide", data={**first, "action": "reject", "reason": "superseded"}).status_code == 303
    page = ann.get("/").text  # the newer version: decided before, and no newer one behind it
    assert "北京远通科技有限公司" in page and 'id="superseded"' not in page
    assert 'id="decided-before"' in page and "by ann (rejected)" in page
    stale = ann.post("/decide", data={**first, "action": "reject", "reason": "superseded"})
    assert stale.status_code == 409 and "already decided by ann (rejected)" in stale.text


def test_review_serve_refuses_to_start_without_a_secret() -> None:
    from click.testing import CliRunner

    from streams.cli.main import cli

    result = CliRunner().invoke(cli, ["review", "serve"], env={"SEQSTREAM_REVIEW__SECRET": ""})
    assert result.exit_code != 0 and "SEQSTREAM_REVIEW__SECRET" in result.output


@pytest.mark.kafka
def test_behind_a_proxy_its_header_names_the_reviewer_and_forms_still_need_the_token(desk) -> None:
    settings, queue = desk
    publish(settings, [review_record("h1")], partition=0)
    poll_until([queue], lambda: queue.depth() == 1)
    proxied = msgspec.structs.replace(settings.review, user_header="X-Forwarded-User")
    client = TestClient(desk_app(proxied, queue), follow_redirects=False)
    assert client.get("/").headers["location"] == "/signin"  # no header: not signed in
    client.headers["X-Forwarded-User"] = "oidc-ann"
    page = client.get("/").text
    assert "oidc-ann" in page and '<h2 id="doc-id">h1</h2>' in page
    form = form_of(page)
    assert client.post("/decide", data={**form, "csrf": "", "action": "accept"}).status_code == 403
    assert client.post("/decide", data={**form, "action": "accept"}).status_code == 303
    [value] = committed_records(settings, settings.topics.fields)
    assert msgspec.json.decode(value, type=FieldRecord).reviewed.reviewer == "oidc-ann"


@pytest.mark.kafka
def test_a_hold_left_by_a_closed_browser_runs_out_and_nothing_is_lost(kafka_bootstrap) -> None:
    settings = desk_settings(kafka_bootstrap, partitions=1)
    now = [1_000.0]
    queue = Queue(settings, f"test-{uuid.uuid4().hex[:6]}", clock=lambda: now[0])
    try:
        publish(settings, [review_record("l1")])
        poll_until([queue], lambda: queue.depth() == 1)
        held = queue.next_for("ann")  # ann opens the page, then closes her browser
        assert queue.next_for("bob") is None  # held for ann meanwhile
        now[0] += settings.review.lease_s + 1
        taken = queue.next_for("bob")
        assert taken is held  # the same record, now bob's
        with pytest.raises(NotYours, match="not the record you hold"):
            queue.decide(held.at, Choice("ann", "accept", {}))
        queue.decide(taken.at, Choice("bob", "accept", {}))
    finally:
        queue.close()
    [value] = committed_records(settings, settings.topics.fields)
    assert msgspec.json.decode(value, type=FieldRecord).reviewed.reviewer == "bob"


@pytest.mark.kafka
def test_review_serve_runs_the_desk_on_its_port_and_stops_on_sigterm(kafka_bootstrap) -> None:
    from ops.stress.worker_process import free_port, http_get

    settings = desk_settings(kafka_bootstrap, partitions=1)
    publish(settings, [review_record("srv1")])
    port = free_port()
    env = {**os.environ, "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap, "SEQSTREAM_REVIEW__SECRET": SECRET}
    env |= {"SEQSTREAM_TOPICS__REVIEW": settings.topics.review, "SEQSTREAM_REVIEW__GROUP_ID": settings.review.group_id}
    command = [sys.executable, "-m", "streams.cli.main", "review", "serve", "--port", str(port), "--instance", "srv"]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while http_get(f"http://127.0.0.1:{port}/healthz")[0] != 200:
            assert server.poll() is None, server.stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the desk never answered"
            time.sleep(0.5)
        status, body = http_get(f"http://127.0.0.1:{port}/signin")
        assert status == 200 and b'name="secret"' in body
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0 and "review desk srv stopped" in output, output[-2000:]


@pytest.mark.kafka
def test_the_backlog_counts_records_past_a_paused_partition(desk) -> None:
    """A desk holds BUFFERED_MAX records per partition and pauses it; what arrives after still counts,
    or the backlog (and the "queue grew for an hour" alert on it) would stop at the shelf's size."""
    settings, queue = desk
    publish(settings, [review_record(f"b{i}") for i in range(BUFFERED_MAX + 20)], partition=0)
    poll_until([queue], lambda: queue.depth() == BUFFERED_MAX and queue.shelves[0].paused)
    for _ in range(10):  # the pause reaches the fetcher: what is published next is not fetched
        queue.poll(0.2)
    publish(settings, [review_record(f"late{i}") for i in range(30)], partition=0)
    for _ in range(5):
        queue.poll(0.2)
    assert queue.depth() == BUFFERED_MAX  # still paused: nothing more is read
    poll_until([queue], lambda: queue.backlog()[0] == BUFFERED_MAX + 20 + 30)  # asked of the broker, every 2 s


@pytest.mark.kafka
def test_the_reader_waits_for_records_without_holding_the_queue(desk) -> None:
    """`seqstream review serve` polls on a thread of its own, back to back. A Python lock is not
    fair: a reader that held the queue's lock through each wait for the broker and took it back at
    once kept the pages' threads out for over a minute on a loaded machine (a desk page timed out in
    CI). Waiting, the reader must leave the lock free."""
    settings, queue = desk
    publish(settings, [review_record("polled")])
    poll_until([queue], lambda: queue.depth() == 1)  # then nothing more arrives: the reader only waits
    stop = threading.Event()
    reader = threading.Thread(target=read_queue, args=(queue, stop), daemon=True)
    reader.start()
    try:
        held = []
        for _ in range(40):
            time.sleep(0.025)
            held.append(queue.lock.locked())
        assert held.count(True) < 10, f"the lock was held at {held.count(True)} of 40 looks"
    finally:
        stop.set()
        reader.join(5)
