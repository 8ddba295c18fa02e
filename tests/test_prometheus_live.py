"""A real Prometheus (Debian's binary) scraping a live `seqstream worker`, `seqstream sink
postgres` and `seqstream review serve` on the real broker and a real PostgreSQL while documents
flow (and a reviewer decides one): every expression of every Grafana dashboard and every alert rule
is evaluated through /api/v1/query, and the down alerts are seen firing once the worker and the
sink are stopped.

The rules are ops/prometheus/alerts.yml as shipped, with their `for` waits cut to one scrape
(promtool's unit tests hold the waits themselves); Grafana's $__rate_interval becomes a window that
covers the whole run.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from ops.demo.samples import sample_documents
from ops.postgres import PostgresServer
from ops.stress.worker_process import OutputReader, WorkerProcess, free_port, isolated_settings
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics
from tests.prometheus_fixture import ROOT, RULES, PrometheusServer

pytestmark = pytest.mark.kafka

BY_HAND = ROOT / "ops" / "prometheus" / "by-hand.yml"
DASHBOARDS = sorted((ROOT / "ops" / "grafana" / "dashboards").glob("*.json"))
SCRAPE_S = 2
RATE_WINDOW = "5m"
DOCUMENTS = 12  # half with submitted_at, half timed from their Kafka timestamp
# Panels with no series on a machine without a GPU: the worker exports GPU memory for CUDA devices only.
EMPTY_ON_CPU = {"GPU memory"}
# Alerts that must fire once the only worker and the sink are stopped.
GONE = {"SeqStreamWorkerDown", "SeqStreamNoWorkerReady", "SeqStreamSinkDown"}
SINK_COMMAND = [sys.executable, "-m", "streams.cli.main", "sink", "postgres"]
DESK_COMMAND = [sys.executable, "-m", "streams.cli.main", "review", "serve"]
DESK_SECRET = "live-test-secret"


def decide_one(port: int, timeout_s: float = 60) -> None:
    """Sign in to the desk and accept the first record it shows, as a reviewer's browser would."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    base = f"http://127.0.0.1:{port}"
    page = opener.open(base + "/signin", timeout=10).read().decode()
    sign_in = {"csrf": re.search(r'name="csrf" value="([^"]+)"', page)[1], "reviewer": "ann", "secret": DESK_SECRET}
    opener.open(base + "/signin", urllib.parse.urlencode(sign_in).encode(), timeout=60)
    deadline = time.monotonic() + timeout_s
    while 'id="doc-id"' not in (page := opener.open(base + "/", timeout=60).read().decode()):
        assert time.monotonic() < deadline, "the desk showed no review record"
        time.sleep(0.5)
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)) | {"action": "accept"}
    # The desk may take up to its three transactional calls' bound, 3 x (transaction timeout + grace) = 36 s.
    answer = opener.open(base + "/decide", urllib.parse.urlencode(form).encode(), timeout=60).read().decode()
    assert "accepted." in answer, answer[-2000:]  # the desk's next page says what was decided


def dashboard_targets() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expression) for every query of every dashboard."""
    return [
        (path.name, panel["title"], target["expr"])
        for path in DASHBOARDS
        for panel in json.loads(path.read_text())["panels"]
        for target in panel.get("targets", [])
    ]


def shipped_rules(wait: str) -> dict[str, Any]:
    """alerts.yml with every `for` cut to `wait`."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = wait
    return rules


def _values(series: list[dict[str, Any]]) -> list[float]:
    return [float(s["value"][1]) for s in series]


def _scrapes(prometheus: PrometheusServer) -> list[dict[str, Any]]:
    """The worker's target as Prometheus sees it, and how many of its scrapes succeeded: for failures."""
    targets = prometheus.api("targets")["activeTargets"]
    worker = [{k: t[k] for k in ("health", "lastError")} for t in targets if t["labels"]["job"] == "seqstream-worker"]
    ups = prometheus.query(
        'count_over_time(up{job="seqstream-worker"}[5m]) - sum_over_time(up{job="seqstream-worker"}[5m])'
    )
    return [*worker, {"failed scrapes": _values(ups)}]


def _nan(series: dict[str, Any]) -> bool:
    return math.isnan(float(series["value"][1]))


# Both workers: the Faust app and the transactional worker serve /metrics from different code.
@pytest.fixture(params=["at_least_once", "exactly_once"])
def worker_and_prometheus(
    kafka_bootstrap, tiny_model_dir, postgres_server: PostgresServer, tmp_path: Path, request
) -> Iterator[tuple]:
    port, sink_port, desk_port = free_port(), free_port(), free_port()
    settings, env = isolated_settings(
        kafka_bootstrap,
        tiny_model_dir,
        tmp_path / "faust",
        worker__web_port=str(port),
        worker__delivery=request.param,
        model__max_new_tokens="8",
        sink__dsn=postgres_server.dsn,
        sink__db_schema=f"sink_{uuid.uuid4().hex[:8]}",
        sink__group_id=f"sink-{uuid.uuid4().hex[:8]}",
        sink__metrics_port=str(sink_port),
        review__secret=DESK_SECRET,
        review__port=str(desk_port),
        review__group_id=f"desk-{uuid.uuid4().hex[:8]}",
    )
    create_topics(settings)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    sink = WorkerProcess(env, tmp_path / "sink.log", command=SINK_COMMAND)
    desk = WorkerProcess(env, tmp_path / "desk.log", command=DESK_COMMAND)
    # The shipped configuration for workers and sinks started by hand, its target files written as
    # the README's "Monitoring by hand" says; only the intervals are cut to the test's pace.
    config = yaml.safe_load(BY_HAND.read_text())
    interval = f"{SCRAPE_S}s"
    config["global"] = {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": "1s"}
    targets = tmp_path / "prometheus" / "targets"
    targets.mkdir(parents=True)
    (targets / "workers.yml").write_text(f'- targets: ["127.0.0.1:{port}"]\n')
    (targets / "sinks.yml").write_text(f'- targets: ["127.0.0.1:{sink_port}"]\n')
    (targets / "desks.yml").write_text(f'- targets: ["127.0.0.1:{desk_port}"]\n')
    prometheus = PrometheusServer(tmp_path / "prometheus", config, shipped_rules(f"{SCRAPE_S}s"))
    reader = OutputReader(settings)
    worker.start()
    sink.start()
    desk.start()
    prometheus.start()
    try:
        yield settings, port, worker, sink, prometheus, reader, desk_port
    finally:
        worker.stop()
        sink.stop()
        desk.stop()
        prometheus.stop()
        reader.close()


def _wait_for(check, what: str, prometheus: PrometheusServer, timeout_s: float = 60) -> None:
    """Until `check()` holds; the deadline only keeps a broken run from hanging."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened\n{prometheus.log_tail()}")
        time.sleep(0.5)


def test_every_panel_and_rule_evaluates_on_a_live_worker(worker_and_prometheus) -> None:
    settings, port, worker, sink, prometheus, reader, desk_port = worker_and_prometheus
    t = settings.topics
    worker.wait_ready(port)
    # A scrape of the idle worker and sink first: the rates then span the run from its zeros.
    scraped_idle = '(seqstream_ready{job="seqstream-worker"} == 1) and on () up{job="seqstream-sink"} == 1'
    _wait_for(lambda: bool(prometheus.query(scraped_idle)), "a scrape of the ready worker and sink", prometheus)
    submitted = datetime.now(UTC)
    docs = [
        msgspec.json.encode({**raw, "submitted_at": submitted} if i % 2 else raw)
        for i, (raw, _) in enumerate(sample_documents(DOCUMENTS, 41))
    ]
    produce_lines(settings, t.raw, [*docs, b"not json"])
    out = reader.read_until(
        lambda o: len(o.doc_ids(t.fields, t.review)) >= DOCUMENTS and len(o.records[t.dead_letter]) >= 1,
        timeout_s=180,
        worker=worker,
    )
    fields = len(out.records[t.fields])
    # Until Prometheus has scraped the whole run: every input counted, and the lag gauge (refreshed
    # on the worker's timer) caught up on each of the raw topic's partitions.
    inputs = 'sum(seqstream_input_messages_total{job="seqstream-worker"})'
    idle = 'seqstream_consumer_lag{job="seqstream-worker"} == 0'
    applied = 'sum(seqstream_sink_applied_total{job="seqstream-sink"})'
    sink_idle = 'seqstream_sink_lag{job="seqstream-sink"} == 0'

    def caught_up() -> bool:
        worker.assert_alive()
        sink.assert_alive()
        return (
            _values(prometheus.query(inputs)) == [DOCUMENTS + 1]
            and len(prometheus.query(idle)) == settings.topics.partitions
            and _values(prometheus.query(applied)) == [fields]
            and len(prometheus.query(sink_idle)) == settings.topics.partitions
        )

    _wait_for(caught_up, "a scrape of the whole run", prometheus)
    decide_one(desk_port)  # the random tiny model sends every document to review
    decided = 'sum(seqstream_review_decisions_total{job="seqstream-review"}) == 1'
    _wait_for(lambda: bool(prometheus.query(decided)), "a scrape of the desk's decision", prometheus)

    empty, nan = [], []
    for dashboard, title, expr in dashboard_targets():
        series = prometheus.query(expr.replace("$__rate_interval", RATE_WINDOW))  # raises on a query error
        if title in EMPTY_ON_CPU:
            assert not series, (title, expr, series)
        elif not series:
            empty.append((dashboard, title, expr))
        elif any(_nan(s) for s in series):
            nan.append((dashboard, title, expr, [s for s in series if _nan(s)]))
        # Prometheus scrapes itself too, as a newcomer's setup does: no panel may show its series.
        assert all(s["metric"].get("job", "seqstream-worker") == "seqstream-worker" for s in series), (title, expr)
    assert not empty, f"panels with no series under load: {empty}\nscrapes: {_scrapes(prometheus)}"
    assert not nan, f"panels with NaN under load: {nan}"
    # Both starts of the end-to-end latency were observed, one per result record.
    latency = prometheus.query('sum by (start) (seqstream_end_to_end_seconds_count{job="seqstream-worker"})')
    assert {s["metric"]["start"]: float(s["value"][1]) for s in latency} == {
        "submitted_at": DOCUMENTS // 2,
        "kafka_timestamp": DOCUMENTS - DOCUMENTS // 2 + 1,  # the malformed message's dead letter too
    }

    rules = [r for g in shipped_rules("0s")["groups"] for r in g["rules"]]
    for rule in rules:
        prometheus.query(rule["expr"])  # raises on a query error
    assert not GONE & prometheus.firing(), "down alerts fire while the worker and the sink run"

    # SIGKILL: down is down, and a graceful Faust shutdown would only lengthen the test.
    worker.kill()
    sink.kill()
    _wait_for(lambda: prometheus.firing() >= GONE, f"{sorted(GONE)} firing", prometheus)
