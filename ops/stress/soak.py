"""`seqstream-ops bench soak`: a worker under more input than it can process, watched over time.

A burst of documents is published at once (far faster than any worker extracts), then a steady
rate for the given minutes; publishing stops and the lag must drain. Every `sample_s` seconds it
records documents sent and answered, the lag, the interval's throughput and the worker's resident
memory (RSS, from /proc: Linux). At the end every document is accounted for: answered, duplicated
(at-least-once), lost. The worker is a `seqstream worker` child process with the same settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer

from ops.demo.samples import sample_documents
from streams.kafka.clients import client_config, polled_messages
from streams.kafka.topics import create_topics
from streams.settings import Settings, settings_environ

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """Resident memory of a process now: what the kernel charges it (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass(frozen=True)
class Sample:
    elapsed_s: float
    sent: int
    answered: int  # distinct documents with a field, review or dead-letter record
    rss_bytes: int
    docs_per_s: float  # answered in this interval

    @property
    def lag(self) -> int:
        return self.sent - self.answered


@dataclass
class SoakResult:
    samples: list[Sample] = field(default_factory=list)
    sent: int = 0
    answered: int = 0
    duplicated: int = 0
    lost: int = 0
    drained: bool = False
    worker_alive: bool = True
    idle_rss_bytes: int = 0  # after one warm-up document: model loaded, nothing queued
    # error_code -> dead letters among the answers (first answers only), to tell which path a flood took
    dead_letter_codes: Counter[str] = field(default_factory=Counter)

    @property
    def peak_rss_bytes(self) -> int:
        return max((s.rss_bytes for s in self.samples), default=0)

    @property
    def peak_lag(self) -> int:
        return max((s.lag for s in self.samples), default=0)

    def summary(self) -> str:
        busy = [s.docs_per_s for s in self.samples if s.docs_per_s > 0]
        mean = sum(busy) / len(busy) if busy else 0.0
        return (
            f"sent={self.sent} answered={self.answered} duplicated={self.duplicated} lost={self.lost} "
            f"drained={self.drained} worker_alive={self.worker_alive} peak_lag={self.peak_lag} "
            f"peak_rss_mib={self.peak_rss_bytes / MIB:.0f} mean_docs_per_s={mean:.1f}"
        )


def soak_documents(count: int, text_chars: int, seed: int, run: str) -> list[bytes]:
    """Sample documents with their text padded to `text_chars` (big input is what fills memory)."""
    out = []
    for i, (raw, _) in enumerate(sample_documents(count, seed=seed)):
        raw = {**raw, "doc_id": f"soak-{run}-{i}"}
        if text_chars > len(raw["text"]):
            raw["text"] = (raw["text"] * (text_chars // len(raw["text"]) + 1))[:text_chars]
        out.append(json.dumps(raw, ensure_ascii=False).encode())
    return out


def run_soak(
    settings: Settings,
    *,
    minutes: float,
    burst: int,
    rate: float,
    text_chars: int = 2000,
    sample_s: float = 5.0,
    drain_timeout_s: float = 600.0,
    log_path: Path = Path("var/soak/worker.log"),
    echo: Callable[[str], None] = print,
    seed: int = 0,
) -> SoakResult:
    create_topics(settings)
    run = uuid.uuid4().hex[:8]
    total = burst + int(rate * minutes * 60)
    documents = soak_documents(total, text_chars, seed, run)
    wanted = {f"soak-{run}-{i}".encode() for i in range(total)}

    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **settings_environ(settings), "SEQSTREAM_WORKER__WORKER_ID": f"soak-{run}"}
    with log_path.open("ab") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "streams.cli.main", "worker", "--no-create-topics"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    reader = _reader(settings, run)
    answers: Counter[bytes] = Counter()
    result = SoakResult()
    try:
        result.idle_rss_bytes = _warm_up(settings, worker, reader, run, drain_timeout_s)
    except BaseException:
        reader.close()
        _stop(worker)
        raise
    echo(f"soak: worker warm, RSS {result.idle_rss_bytes / MIB:.0f} MiB with nothing queued")
    sent = [0]
    publisher = threading.Thread(
        target=_publish, args=(settings, documents, burst, rate, sent), name="soak-publisher", daemon=True
    )
    echo(f"soak: {burst} documents at once, then {rate:g}/s for {minutes:g} min; {text_chars} chars each")
    echo(f"{'elapsed_s':>9} {'sent':>7} {'answered':>8} {'lag':>7} {'docs/s':>7} {'rss_mib':>7}")
    started = time.monotonic()
    publisher.start()
    next_sample, last_answered = started + sample_s, 0
    try:
        while True:
            _read(reader, answers, wanted, result.dead_letter_codes, settings.topics.dead_letter)
            now = time.monotonic()
            if now >= next_sample:
                answered = len(answers)
                alive = worker.poll() is None
                sample = Sample(
                    elapsed_s=now - started,
                    sent=sent[0],
                    answered=answered,
                    rss_bytes=rss_bytes(worker.pid) if alive else 0,
                    docs_per_s=(answered - last_answered) / sample_s,
                )
                result.samples.append(sample)
                echo(
                    f"{sample.elapsed_s:9.0f} {sample.sent:7d} {sample.answered:8d} {sample.lag:7d} "
                    f"{sample.docs_per_s:7.1f} {sample.rss_bytes / MIB:7.0f}"
                )
                next_sample, last_answered = next_sample + sample_s, answered
                if not alive:
                    result.worker_alive = False
                    echo(f"the worker exited with {worker.returncode}; see {log_path}")
                    break
            if not publisher.is_alive() and len(answers) >= total:
                result.drained = True
                break
            if not publisher.is_alive() and now - started > minutes * 60 + drain_timeout_s:
                break
    finally:
        reader.close()
        _stop(worker)
    result.sent = sent[0]
    result.answered = len(answers)
    result.duplicated = sum(answers.values()) - len(answers)
    result.lost = total - len(answers)
    echo("soak: " + result.summary())
    return result


def _stop(worker: subprocess.Popen) -> None:
    worker.terminate()
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()


def _warm_up(settings: Settings, worker: subprocess.Popen, reader: Consumer, run: str, timeout_s: float) -> int:
    """One document through, so that the RSS baseline has the model loaded and nothing queued."""
    value = soak_documents(1, 200, seed=1, run=f"{run}-warmup")[0]
    key = json.loads(value)["doc_id"].encode()
    producer = Producer(client_config(settings))
    producer.produce(settings.topics.raw, value=value, key=key)
    producer.flush(60)
    answer: Counter[bytes] = Counter()
    deadline = time.monotonic() + timeout_s
    while not answer[key]:
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited with {worker.returncode} before its first document")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the warm-up document was not answered in {timeout_s:.0f} s")
        _read(reader, answer, {key})
    time.sleep(1.0)  # let the batch's temporaries go before measuring
    return rss_bytes(worker.pid)


def _publish(settings: Settings, documents: list[bytes], burst: int, rate: float, sent: list[int]) -> None:
    producer = Producer({**client_config(settings), "enable.idempotence": True, "linger.ms": 20})
    started = time.monotonic()
    for i, value in enumerate(documents):
        if i >= burst and rate > 0:
            # Steady part: document i is due at (i - burst) / rate seconds after the burst.
            delay = started + (i - burst) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        key = json.loads(value)["doc_id"].encode()
        while True:
            try:
                producer.produce(settings.topics.raw, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        sent[0] = i + 1
        if i + 1 == burst:
            producer.flush(60)
            started = time.monotonic()
    producer.flush(120)


def _reader(settings: Settings, run: str) -> Consumer:
    t = settings.topics
    consumer = Consumer(
        {
            **client_config(settings),
            "group.id": f"seqstream-soak-{run}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([t.fields, t.review, t.dead_letter])
    return consumer


def _fail(error: KafkaError) -> None:
    raise RuntimeError(error)


def _read(
    consumer: Consumer,
    answers: Counter[bytes],
    wanted: set[bytes],
    dead_letter_codes: Counter[str] | None = None,
    dead_letter_topic: str = "",
) -> None:
    for message in polled_messages(consumer.consume(1000, timeout=0.5), _fail):
        # Records are keyed by doc_id; earlier runs' records on the same topics are not ours.
        if message.key() in wanted:
            first = not answers[message.key()]
            answers[message.key()] += 1
            if first and dead_letter_codes is not None and message.topic() == dead_letter_topic:
                dead_letter_codes[json.loads(message.value())["error_code"]] += 1
