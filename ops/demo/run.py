"""`seqstream-ops demo`: the whole product on one machine, with sample documents and their results.

It starts what is missing (a local Apache Kafka broker unless one is configured, a worker process),
publishes sample documents plus a few malformed messages, and prints every record they produced.
The samples are full-length documents from the corpus generator (`seqstream-ops corpus generate`), the
kind the demo model was trained on, from a seed neither its training nor its evaluation used, and
one long contract that the model reads in two windows (`long_sample`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import click
import msgspec

from ops.corpus import GeneratedDocument, generate_corpus, generate_document
from streams.cli.show import describe
from streams.kafka.client_log import LOGGER_NAME as CLIENT_LOGGER
from streams.kafka.clients import consume, produce_lines
from streams.kafka.topics import create_topics
from streams.settings import Settings

DEMO_DIR = Path("var/demo")
# The demo model trained on generator seed 1 and was scored on seed 2 (ops/train/demo_model.py).
SAMPLE_SEED = 7
# A contract longer than the demo model's window (1,024 tokens, one a character: ~990 characters of
# text beside the prompt), so it is read in two windows; its amount, signing date and place lie
# beyond the first. Picked among the sample seed's long contracts of 1,500-1,800 characters as one
# whose windows all hold values: this small model guesses, unsure, in a window without a label's
# value (README, Long documents), and an entropy alarm sends the document to review.
LONG_SAMPLE_INDEX, LONG_SAMPLE_CHARS = 1004, 1800
# Messages that must land in the dead-letter topic, one per kind of bad input.
MALFORMED = [
    b"this is not json",
    b'["an", "array"]',
    b'{"doc_id": "demo-bad-1", "text": "", "field_set": "contract"}',
    b'{"doc_id": "demo-bad-2", "text": "some text", "field_set": "no_such_set"}',
    b'{"doc_id": "demo-bad-3", "text": "some text", "labels": ["name:first"]}',
]


def run_demo(settings: Settings, documents: int, keep_running: bool) -> None:
    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    # The demo's own clients' librdkafka lines (a fresh broker's "Coordinator load in progress"
    # while its transaction coordinator starts) go to a file beside the worker's log, not among the results.
    clients = logging.getLogger(CLIENT_LOGGER)
    clients.addHandler(logging.FileHandler(DEMO_DIR / "clients.log"))
    clients.propagate = False
    broker = None
    if "KAFKA_BOOTSTRAP_SERVERS" not in os.environ and "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS" not in os.environ:
        from ops.kafka.launcher import KafkaBroker

        click.secho("starting a local Apache Kafka broker (KRaft, jars from Maven Central, cached)...", fg="cyan")
        # A fresh log each run: the results shown are read from the topics' start, and a log kept
        # from an earlier run would show that run's records (same doc ids) first.
        shutil.rmtree(DEMO_DIR / "kafka", ignore_errors=True)
        broker = KafkaBroker(DEMO_DIR / "kafka")
        settings.kafka.bootstrap_servers = broker.start()
        # One broker: one replica of everything (the defaults are a three-broker cluster's).
        settings.topics.replication_factor = settings.topics.min_insync_replicas = 1
    click.secho(f"broker: {settings.kafka.bootstrap_servers}", fg="cyan")
    settings.model.path = _model_path(settings.model.path)
    for name, outcome in create_topics(settings).items():
        click.echo(f"  topic {name}: {outcome}")

    samples = [doc.raw() for doc in [*generate_corpus(documents, seed=SAMPLE_SEED), long_sample()]]
    lines = [msgspec.json.encode(raw) for raw in samples] + MALFORMED
    expected = {raw["doc_id"] for raw in samples}
    worker = _start_worker(settings)
    desk = _start_desk(settings)
    try:
        click.secho(f"publishing {len(samples)} sample documents and {len(MALFORMED)} malformed messages", fg="cyan")
        produce_lines(settings, settings.topics.raw, lines)
        reviews = _show_results(settings, expected, len(MALFORMED))
        _show_desk(settings, reviews, keep_running)
        if keep_running:
            click.secho("broker, worker and review desk keep running; Ctrl-C stops them", fg="cyan")
            worker.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for process in (desk, worker):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        if broker is not None:
            broker.stop()


def long_sample() -> GeneratedDocument:
    return generate_document("contract", SAMPLE_SEED, LONG_SAMPLE_INDEX, long=True, chars=LONG_SAMPLE_CHARS)


def _model_path(path: str) -> str:
    """SeqGPT if it can be loaded here; otherwise the shipped demo model, announced as such."""
    from model.runner.loading import resolve_model_path

    resolved, standing_in = resolve_model_path(path)
    if standing_in:
        click.secho(
            f"SeqGPT-560M is not available offline; using the DEMO MODEL at {resolved} (a small model trained "
            "on generated documents: its output shows the pipeline, not SeqGPT's quality). "
            "Point SEQSTREAM_MODEL__PATH at a SeqGPT copy for real output.",
            fg="yellow",
            bold=True,
        )
    return resolved


def _start_worker(settings: Settings) -> subprocess.Popen:
    env = {
        **os.environ,
        "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
        "SEQSTREAM_MODEL__PATH": settings.model.path,
        # The worker's settings must agree with the topics the demo created (1 and 1 on its own broker).
        "SEQSTREAM_TOPICS__REPLICATION_FACTOR": str(settings.topics.replication_factor),
        "SEQSTREAM_TOPICS__MIN_INSYNC_REPLICAS": str(settings.topics.min_insync_replicas),
        "SEQSTREAM_WORKER__DATA_DIR": str(DEMO_DIR / "faust"),
        "SEQSTREAM_WORKER__WEB_PORT": "0",
    }
    log = (DEMO_DIR / "worker.log").open("ab")
    click.secho(f"starting the worker (log: {DEMO_DIR / 'worker.log'})", fg="cyan")
    return subprocess.Popen(
        [sys.executable, "-m", "streams.cli.main", "worker"], env=env, stdout=log, stderr=subprocess.STDOUT
    )


def _start_desk(settings: Settings) -> subprocess.Popen:
    """The review desk on the demo's topics; a secret made up for this run unless one is set."""
    settings.review.secret = settings.review.secret or f"demo-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
        "SEQSTREAM_REVIEW__SECRET": settings.review.secret,
        "SEQSTREAM_REVIEW__PORT": str(settings.review.port),
    }
    log = (DEMO_DIR / "desk.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "streams.cli.main", "review", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _show_desk(settings: Settings, reviews: int, keep_running: bool) -> None:
    url = f"http://{settings.review.host}:{settings.review.port}/"
    deadline = time.monotonic() + 15
    while not _answers(url + "healthz") and time.monotonic() < deadline:
        time.sleep(0.5)
    if not _answers(url + "healthz"):
        click.secho(f"the review desk did not answer at {url} (its log: {DEMO_DIR / 'desk.log'})", fg="red")
        return
    click.secho(
        f"\nreview desk: {url} holds {reviews} review records; sign in with any name and the secret "
        f"{settings.review.secret!r}",
        bold=True,
    )
    if not keep_running:
        click.echo("  (the demo stops here: `ops/dev.sh demo --keep-running` leaves the desk up to use it)")


def _show_results(settings: Settings, expected: set[str], malformed: int, timeout_s: float = 300) -> int:
    """Print every record the samples produced, then the counts; returns how many went to review."""
    t = settings.topics
    seen: set[str] = set()
    counts: Counter[str] = Counter()
    dead = 0
    deadline = time.monotonic() + timeout_s
    for message in consume(settings, [t.fields, t.review, t.alerts, t.dead_letter], idle_timeout=timeout_s):
        topic = message.topic()
        click.echo(describe(topic, t, message.value()))
        counts[topic] += 1
        if topic in (t.fields, t.review):
            seen.add(json.loads(message.value())["doc_id"])
        elif topic == t.dead_letter:
            dead += 1
        if (expected <= seen and dead >= malformed) or time.monotonic() > deadline:
            break
    click.secho("\nsummary", bold=True)
    for topic in (t.fields, t.review, t.alerts, t.dead_letter):
        click.echo(f"  {topic:28} {counts[topic]:5d} records")
    missing = expected - seen
    click.secho(
        f"  all {len(expected)} documents accounted for" if not missing else f"  {len(missing)} documents not seen yet",
        fg="green" if not missing else "red",
    )
    return counts[t.review]
