"""The README's examples run as printed: "Run it by hand" (a broker, the worker on the demo model,
20 generated documents, PostgreSQL, the sink), then "Monitoring by hand" (Prometheus on
ops/prometheus/by-hand.yml) in the same shell, then the BI queries against what they made, each
held to what its comment promises. An example that drifts from the code fails here.

The blocks run from a scratch folder that links the checkout's ops/ (the README's commands run
from a checkout), with the ports and the broker's folder moved to free ones: several runs share
one machine. Nothing else is changed; the processes they start are ended with their session.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from ops.stress.worker_process import OutputReader, free_port, http_get
from streams.settings import Settings, load_settings
from tests.prometheus_fixture import binary
from tests.readme_blocks import README, blocks, sql_statements

pytestmark = pytest.mark.kafka

ROOT = README.parent
DOCUMENTS = 20  # `seqstream-ops corpus generate --count 20`
SCRIPT_TIMEOUT_S = 900


@dataclass
class Run:
    output: str
    dsn: str
    settings: Settings
    prometheus_port: int
    fields: list[dict]


def _moved(script: str, ports: dict[str, int], folder: Path) -> str:
    for printed, free in ports.items():
        script = re.sub(rf"(?<![0-9]){printed}(?![0-9])", str(free), script)
    return script.replace("/tmp/seqstream-kafka", str(folder / "kafka-data"))


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory) -> Iterator[Run]:
    binary("prometheus")  # fails saying what to install, where it is missing
    folder = tmp_path_factory.mktemp("readme")
    (folder / "ops").symlink_to(ROOT / "ops")
    ports = {"9092": free_port(), "6066": free_port(), "6067": free_port(), "9090": free_port()}
    [run_by_hand] = blocks("## Run it by hand", "sh")
    [monitoring] = blocks("**Monitoring by hand.**", "sh")
    script = _moved(run_by_hand + monitoring, ports, folder)
    # A clean shell: the checkout's code and tools first, none of this machine's SeqStream settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEQSTREAM_", "KAFKA_"))}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "SEQSTREAM_WORKER__DATA_DIR": str(folder / "faust"),
    }
    log = folder / "script.log"
    started = time.monotonic()
    with log.open("wb") as out:
        shell = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        try:
            rc = shell.wait(SCRIPT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        output = log.read_text(errors="replace")
        assert rc == 0, f"the README's blocks ended with {rc}:\n{output[-4000:]}\n{_logs(folder)}"
        print(f"\nREADME blocks ran in {time.monotonic() - started:.1f} s", flush=True)
        dsn = re.search(r"SEQSTREAM_SINK__DSN='([^']*)'", (folder / "pg.env").read_text())[1]
        settings = load_settings(kafka={"bootstrap_servers": f"127.0.0.1:{ports['9092']}"})
        yield Run(output, dsn, settings, ports["9090"], _all_fields(settings))
    finally:
        _end_session(shell)


def _all_fields(settings: Settings) -> list[dict]:
    """The worker's records once every document has one (fields, review or dead letter)."""
    reader = OutputReader(settings)
    try:
        t = settings.topics
        out = reader.read_until(
            lambda o: len(o.doc_ids(t.fields, t.review, t.dead_letter)) >= DOCUMENTS, timeout_s=SCRIPT_TIMEOUT_S
        )
        return out.records[t.fields]
    finally:
        reader.close()


def _end_session(shell: subprocess.Popen) -> None:
    """SIGTERM to everything the blocks started (as Ctrl-C would), SIGKILL to what outlives 30 s."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 5)):
        try:
            os.killpg(shell.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(shell.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def _logs(folder: Path) -> str:
    parts = []
    for name in ("kafka.out", "worker.log", "sink.log", "prometheus.log"):
        path = folder / name
        if path.exists():
            parts.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-20:]))
    return "\n".join(parts)


def _query(dsn: str, statement: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(statement).fetchall()


def test_run_it_by_hand_prints_what_the_readme_says(by_hand: Run) -> None:
    # `seqstream tail ... --max-messages 3` printed three field records.
    assert len(re.findall(r"^FIELDS  \S+", by_hand.output, re.MULTILINE)) == 3, by_hand.output[-3000:]
    # The count query printed a count, and the sink had applied something by then.
    [count] = re.findall(r"^\((\d+),\)$", by_hand.output, re.MULTILINE)
    assert int(count) >= 1


def test_monitoring_by_hand_scrapes_the_worker_and_the_sink(by_hand: Run) -> None:
    # The block's last line: `up` of both jobs, answered as the README says.
    answer = json.loads(by_hand.output.strip().splitlines()[-1])
    up = {r["metric"]["job"]: r["value"][1] for r in answer["data"]["result"]}
    assert up == {"seqstream-worker": "1", "seqstream-sink": "1"}, answer
    # And the worker's own series arrive through that configuration.
    status, body = http_get(
        f"http://127.0.0.1:{by_hand.prometheus_port}/api/v1/query?query=seqstream_input_messages_total"
    )
    assert status == 200 and json.loads(body)["data"]["result"], body


def test_the_bi_queries_return_the_rows_their_comments_promise(by_hand: Run) -> None:
    fields = {r["doc_id"]: r for r in by_hand.fields}
    # The sink has every field record (the BI queries read what it wrote).
    deadline = time.monotonic() + 120
    while _query(by_hand.dsn, "SELECT count(*) FROM doc_fields") != [(len(fields),)]:
        assert time.monotonic() < deadline, "the sink did not catch up with the fields topic"
        time.sleep(1)
    [block] = blocks("**BI queries**", "sql")
    per_label, per_contract, per_salary, per_day = [_query(by_hand.dsn, q) for q in sql_statements(block)]

    # values per label, and how sure the model was
    found = {
        label: [s for r in fields.values() for s in r["fields"].get(label, [])]
        for label in {label for r in fields.values() for label in r["fields"]}
    }
    expected = {label: len(spans) for label, spans in found.items() if spans}
    assert {label: values for label, values, _, _ in per_label} == expected
    assert all(0 < documents <= values and 0 <= confidence <= 1 for _, values, documents, confidence in per_label)

    # one row per contract (documents asked for a contract's labels, values found or not)
    contracts = sorted(d for d, r in fields.items() if {"甲方", "乙方", "合同金额"} <= set(r["labels"]))
    assert contracts, "the demo's documents include contracts that reach the fields topic"
    assert [row[0] for row in per_contract] == contracts

    # one row per salary found in a job ad: its low and high end, its period and its currency
    # (the issue this block answers: none came back before salaries had a type)
    salaries = [
        (d, s["normalised"])
        for d, r in sorted(fields.items())
        for s in r["fields"].get("薪资范围", [])
        if (s.get("normalised") or {}).get("kind") == "salary"
    ]
    assert per_salary, "the salary query returns rows on the demo's documents"

    def number(text: str | None) -> Decimal | None:
        return Decimal(text) if text is not None else None

    assert per_salary == [
        (d, number(n["value"]), number(n.get("end")), n.get("unit"), n.get("currency")) for d, n in salaries
    ]

    # documents per day and model: the model by its name, not a path on the worker's machine
    assert [(model, count) for _, model, count in per_day] == [("seqstream-demo", len(fields))]
