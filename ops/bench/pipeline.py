"""`seqstream-ops bench pipeline`: the whole pipeline under load, beside the naive design, in one run.

Every run is a real `seqstream worker` process on a real broker, with topics and a consumer group
of its own: it waits for /readyz, takes a short warm-up, then the corpus is published either all at
once (a burst: throughput is the worker's capacity) or at a set rate (open loop: each document's
`submitted_at` is its scheduled send time, so a late producer or a slow worker both show as latency).

End-to-end latency = the output record's broker timestamp (set when the worker sends it) minus the
document's `submitted_at`. The stage table is the records' `processing.timings` per document (a
batch's model stages count for each of its documents, since each waits for all of it), plus
serialise and produce from the worker's own /metrics (per batch), plus what is left: broker, fetch,
and waiting for an earlier batch before reaching the consumer's buffer.

The naive design is the same worker with `SEQSTREAM_BATCH__MAX_DOCUMENTS=1`: one message taken,
one `generate()` call (each sample document fits one prompt of <= 6 labels), its outputs written
and acknowledged, its offset committed, then the next. Everything else (code, model, broker) is
identical, so the ratio isolates micro-batching.

Beside every burst run, the engine alone (in this process, no broker) extracts the same documents
in batches of the run's bound, after the worker has stopped: the share of the engine's own rate that
the pipeline keeps is measured in the same run, on the same machine.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from prometheus_client.parser import text_string_to_metric_families

from ops.bench.runs import RunConfig, RunResult
from ops.demo.samples import sample_documents
from streams.kafka.clients import consume, produce_lines
from streams.kafka.topics import create_topics
from streams.settings import Settings

log = logging.getLogger(__name__)

MODEL_STAGES = ("queue", "tokenize", "prefill", "decode", "postprocess")
WORKER_STAGES = ("prepare_wait", "serialise", "produce")
# The part of tokenize (a batch's preparation) the model waited for; the rest was hidden behind the
# previous batch's decode. Shown, but not counted again in the remainder.
WORKER_LABELS = {"prepare_wait": "prepare on the critical path"}
WARMUP_DOCUMENTS = 2


def stage_table(result: RunResult) -> list[tuple[str, float, float]]:
    """(stage, mean ms per document, share of the mean end-to-end latency)."""
    e2e_ms = statistics.fmean(result.latencies_s) * 1000
    rows = [(stage, result.stage_ms[stage]) for stage in MODEL_STAGES]
    rows += [
        (f"{WORKER_LABELS.get(stage, stage)} (per batch)", result.worker_stage_ms.get(stage, 0.0))
        for stage in WORKER_STAGES
    ]
    counted = sum(ms for stage, ms in rows if not stage.startswith(WORKER_LABELS["prepare_wait"]))
    # The rest: waiting in the topic and in Faust's fetch buffers before the batcher saw the document.
    rows.append(("before the batcher (topic, fetch)", max(e2e_ms - counted, 0.0)))
    return [(stage, ms, ms / e2e_ms if e2e_ms else 0.0) for stage, ms in rows]


def build_bench_model(directory: Path, hidden_size: int, n_layer: int, vocab_size: int) -> Path:
    from model.runner.loading import MANIFEST
    from ops.train.tiny import build_tiny_bloom

    if (directory / MANIFEST).is_file():
        return directory
    texts = [raw["text"] for raw, _ in sample_documents(400, seed=1)]
    return build_tiny_bloom(
        directory, texts, seed=0, vocab_size=vocab_size, hidden_size=hidden_size, n_layer=n_layer, n_head=4
    )


def _corpus(count: int, seed: int, prefix: str) -> list[dict]:
    docs = []
    for raw, _ in sample_documents(count, seed=seed):
        docs.append({**raw, "doc_id": f"{prefix}-{raw['doc_id']}"})
    return docs


def _publish(settings: Settings, docs: list[dict], rate_per_s: float | None) -> float:
    """Send the documents, stamping each with its arrival time; returns the first arrival."""
    start = time.time() + 0.2
    times = [start if rate_per_s is None else start + i / rate_per_s for i in range(len(docs))]
    lines = [
        msgspec.json.encode({**doc, "submitted_at": datetime.fromtimestamp(t, UTC)})
        for doc, t in zip(docs, times, strict=True)
    ]
    produce_lines(settings, settings.topics.raw, lines, schedule=None if rate_per_s is None else times)
    return start


def _collect(settings: Settings, doc_ids: set[str], timeout_s: float) -> dict[str, tuple[float, dict]]:
    """doc_id -> (output broker timestamp in s, record), for every document, from its first output."""
    t = settings.topics
    found: dict[str, tuple[float, dict]] = {}
    for message in consume(settings, [t.fields, t.review, t.dead_letter], idle_timeout=timeout_s):
        record = json.loads(message.value())
        doc_id = record.get("doc_id")
        if doc_id in doc_ids and doc_id not in found:
            found[doc_id] = (message.timestamp()[1] / 1000, record)
            if len(found) == len(doc_ids):
                break
    missing = doc_ids - set(found)
    if missing:
        raise RuntimeError(f"{len(missing)} documents produced no output within {timeout_s} s of silence")
    return found


def _worker_stages(port: int) -> dict[str, tuple[float, float]]:
    """stage -> (sum of seconds, count) of the worker's serialise and produce histograms."""
    from ops.stress.worker_process import http_get

    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    totals: dict[str, list[float]] = {s: [0.0, 0.0] for s in WORKER_STAGES}
    for family in text_string_to_metric_families(body.decode()):
        if family.name != "seqstream_stage_seconds":
            continue
        for sample in family.samples:
            stage = sample.labels.get("stage")
            if stage in totals and sample.name.endswith("_sum"):
                totals[stage][0] = sample.value
            elif stage in totals and sample.name.endswith("_count"):
                totals[stage][1] = sample.value
    return {s: (v[0], v[1]) for s, v in totals.items()}


def _per_batch_ms(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Mean ms per batch over the measured corpus only (the warm-up's batches subtracted)."""
    means = {}
    for stage, (total, count) in after.items():
        batches = count - before[stage][1]
        if batches > 0:
            means[stage] = (total - before[stage][0]) / batches * 1000
    return means


def run_once(
    bootstrap: str,
    model_dir: Path,
    work_dir: Path,
    config: RunConfig,
    docs: list[dict],
    max_new_tokens: int,
    engine: str,
    delivery: str = "at_least_once",
    prepare_processes: int = 0,
) -> RunResult:
    from ops.stress.worker_process import WorkerProcess, free_port, isolated_settings

    port = free_port()
    run_dir = work_dir / config.name
    run_dir.mkdir(parents=True, exist_ok=True)
    settings, env = isolated_settings(
        bootstrap,
        model_dir,
        run_dir / "faust",
        batch__max_documents=str(config.max_documents),
        batch__window_ms=str(config.window_ms),
        model__max_new_tokens=str(max_new_tokens),
        model__engine=engine,
        model__prepare_processes=str(prepare_processes),
        worker__delivery=delivery,
        worker__web_port=str(port),
        worker__log_level="warning",
    )
    create_topics(settings)
    worker = WorkerProcess(env, run_dir / "worker.log")
    worker.start()
    try:
        worker.wait_ready(port, timeout_s=300)
        warmup = _corpus(WARMUP_DOCUMENTS, seed=99, prefix=f"warmup-{config.name}")
        _publish(settings, warmup, None)
        _collect(settings, {d["doc_id"] for d in warmup}, timeout_s=300)
        baseline = _worker_stages(port)
        first = _publish(settings, docs, config.rate_per_s)
        found = _collect(settings, {d["doc_id"] for d in docs}, timeout_s=300)
        after = _worker_stages(port)
    finally:
        worker.stop()
    outputs = list(found.values())
    latencies = [ts - datetime.fromisoformat(r["submitted_at"]).timestamp() for ts, r in outputs]
    last = max(ts for ts, _ in outputs)
    timings = [r["processing"]["timings"] for _, r in outputs if "processing" in r]
    stage_ms = {s: statistics.fmean(t[f"{s}_ms"] for t in timings) for s in MODEL_STAGES}
    batches = [r["processing"]["batch_size"] for _, r in outputs if "processing" in r]
    engines = sorted({f"{m['engine']}/{m['attention']}/{m['device']}" for m in (r["model"] for _, r in outputs)})
    return RunResult(
        config=config,
        documents=len(docs),
        latencies_s=latencies,
        throughput_per_s=len(docs) / (last - first),
        wall_s=last - first,
        mean_batch=statistics.fmean(batches),
        stage_ms=stage_ms,
        worker_stage_ms=_per_batch_ms(baseline, after),
        engine=",".join(engines),
    )


@dataclass
class BenchPlan:
    documents: int = 64
    max_new_tokens: int = 32
    batch_sizes: tuple[int, ...] = (1, 4, 16, 32)
    windows_ms: tuple[float, ...] = (5.0, 50.0, 200.0)
    window_batch: int = 32
    # The window sweep runs at this share of the micro-batched burst throughput (below capacity,
    # so latency is latency, not the time to drain a backlog), unless a rate is given.
    rate_share: float = 0.5
    rate_per_s: float | None = None
    hidden_size: int = 256
    n_layer: int = 4
    vocab_size: int = 4000
    seed: int = 0
    # The reference engine is transformers' generate(), which is what the naive design calls.
    engine: str = "reference"
    # A trained model's directory (model/demo) in place of the random one: its answers end where
    # the value does, where a random model's run to the token limit and set the latency's floor.
    model: str | None = None
    delivery: str = "at_least_once"
    # Processes preparing each batch's documents beside the worker's own (model/prepare_pool.py).
    prepare_processes: int = 0


def run_benchmark(plan: BenchPlan, out_dir: Path, bootstrap: str | None, echo=print) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="seqstream-bench-"))
    if plan.model is not None:
        model_dir = Path(plan.model)
    else:
        model_dir = build_bench_model(work / "model", plan.hidden_size, plan.n_layer, plan.vocab_size)
    broker = None
    if bootstrap is None:
        from ops.kafka.launcher import KafkaBroker

        broker = KafkaBroker(work / "kafka")
        bootstrap = broker.start()
    results: list[RunResult] = []
    alone: dict[int, float] = {}
    load_before = os.getloadavg()

    def run(config: RunConfig, corpus: list[dict]) -> RunResult:
        return run_once(
            bootstrap,
            model_dir,
            work,
            config,
            corpus,
            plan.max_new_tokens,
            plan.engine,
            plan.delivery,
            plan.prepare_processes,
        )

    try:
        burst = []
        for size in plan.batch_sizes:
            config = RunConfig(f"batch-{size}", size, 5.0, None)
            echo(f"run {config.name}: max {size} documents per batch, 5 ms window, burst of {plan.documents}")
            corpus = _corpus(plan.documents, plan.seed, config.name)
            burst.append(run(config, corpus))
            echo(f"  {burst[-1].throughput_per_s:.2f} docs/s, P95 {burst[-1].percentile(95):.2f} s")
            alone[size] = engine_alone(plan, model_dir, corpus, size)
            echo(f"  the engine alone, same documents, batches of {size}: {alone[size]:.2f} docs/s")
        results += burst
        rate = plan.rate_per_s
        if rate is None:
            reference = next((r for r in burst if r.config.max_documents == plan.window_batch), burst[-1])
            rate = plan.rate_share * reference.throughput_per_s
        for window in plan.windows_ms:
            config = RunConfig(f"window-{window:g}ms", plan.window_batch, window, rate)
            echo(f"run {config.name}: max {plan.window_batch} per batch, {window:g} ms window, {rate:.2f} docs/s")
            results.append(run(config, _corpus(plan.documents, plan.seed, config.name)))
            echo(f"  {results[-1].throughput_per_s:.2f} docs/s, P95 {results[-1].percentile(95):.2f} s")
        from transformers import AutoTokenizer

        vocab = len(AutoTokenizer.from_pretrained(model_dir))
        shape = json.loads((model_dir / "config.json").read_text())
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    summary = summarise(plan, results, vocab, shape, alone)
    # Other processes on the machine change every number here; the report says how busy it was.
    summary["machine"] = {"cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg()}
    (out_dir / "bench_pipeline.json").write_text(json.dumps(summary, indent=2) + "\n")
    from ops.bench.plots import write_plots

    summary["plots"] = [str(p) for p in write_plots(results, out_dir)]
    return summary


def engine_alone(plan: BenchPlan, model_dir: Path, docs: list[dict], batch: int) -> float:
    """Docs/s of the engine the worker runs, in this process, over `docs` in batches of `batch`
    (after a warm-up on the first batch): what the pipeline would reach if Kafka cost nothing."""
    from model import EngineSettings, build_engine, settle_heap
    from schemas.decode import decode_document

    settings = EngineSettings(
        path=str(model_dir),
        engine=plan.engine,
        max_new_tokens=plan.max_new_tokens,
        prepare_processes=plan.prepare_processes,
    )
    engine = build_engine(settings)
    documents = [decode_document(msgspec.json.encode(d), 1 << 20) for d in docs]
    engine.extract(documents[:batch])
    settle_heap()  # as the worker does once its engine is built
    started = time.perf_counter()
    for start in range(0, len(documents), batch):
        engine.extract(documents[start : start + batch])
    return len(documents) / (time.perf_counter() - started)


def summarise(
    plan: BenchPlan, results: list[RunResult], vocab: int, shape: dict, alone: dict[int, float] | None = None
) -> dict:
    """The naive run (one document per batch) against ours: the largest batch bound of the plan (the
    default plan's 32 is the product's default), both in burst, so both run at capacity."""
    burst = [r for r in results if r.config.rate_per_s is None]
    naive = next((r for r in burst if r.config.max_documents == 1), None)
    ours = max((r for r in burst if r.config.max_documents > 1), key=lambda r: r.config.max_documents, default=None)
    return {
        "plan": asdict(plan),
        "model": {
            "hidden_size": shape["hidden_size"],
            "n_layer": shape["n_layer"],
            "vocab": vocab,
            "weights": plan.model or "random",
        },
        "delivery": plan.delivery,
        "runs": [
            {
                "name": r.config.name,
                "max_documents": r.config.max_documents,
                "window_ms": r.config.window_ms,
                "arrival": r.config.arrival,
                "documents": r.documents,
                "throughput_per_s": r.throughput_per_s,
                "p50_s": r.percentile(50),
                "p95_s": r.percentile(95),
                "p99_s": r.percentile(99),
                "mean_batch": r.mean_batch,
                "engine": r.engine,
                "stages": [{"stage": s, "mean_ms": ms, "share": sh} for s, ms, sh in stage_table(r)],
                "latencies_s": r.latencies_s,
            }
            for r in results
        ],
        "naive": naive.config.name if naive else None,
        "ours": ours.config.name if ours else None,
        "throughput_ratio": ours.throughput_per_s / naive.throughput_per_s if naive and ours else None,
        # Per burst bound: the engine alone on the same documents, and the share of it the pipeline kept.
        "engine_alone": [
            {
                "max_documents": r.config.max_documents,
                "engine_per_s": (alone or {})[r.config.max_documents],
                "pipeline_share": r.throughput_per_s / (alone or {})[r.config.max_documents],
            }
            for r in burst
            if r.config.max_documents in (alone or {})
        ],
    }


def report_markdown(summary: dict) -> str:
    """The numbers as ops/BENCHMARKS.md shows them."""
    m = summary["model"]
    lines = [
        f"Model: {m['weights']} weights, hidden {m['hidden_size']} x {m['n_layer']} layers, vocab {m['vocab']:,}; "
        f"delivery {summary['delivery']}; preparing processes {summary['plan'].get('prepare_processes', 0)}.",
        "",
        "| run | max docs/batch | window ms | arrival | docs/s | P50 s | P95 s | P99 s | mean batch | engine |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in summary["runs"]:
        lines.append(
            f"| {r['name']} | {r['max_documents']} | {r['window_ms']:g} | {r['arrival']} | "
            f"{r['throughput_per_s']:.2f} | {r['p50_s']:.2f} | {r['p95_s']:.2f} | {r['p99_s']:.2f} | "
            f"{r['mean_batch']:.1f} | {r.get('engine', '')} |"
        )
    if summary["throughput_ratio"] is not None:
        lines += [
            "",
            f"Throughput, {summary['ours']} over {summary['naive']} (naive), same run: "
            f"**{summary['throughput_ratio']:.1f}x**",
        ]
    if summary.get("engine_alone"):
        lines += [
            "",
            "| max docs/batch | engine alone docs/s | through Kafka / engine alone |",
            "| ---: | ---: | ---: |",
        ]
        lines += [
            f"| {a['max_documents']} | {a['engine_per_s']:.2f} | {a['pipeline_share']:.2f}x |"
            for a in summary["engine_alone"]
        ]
    for name in (summary["naive"], summary["ours"]):
        run = next((r for r in summary["runs"] if r["name"] == name), None)
        if run is None:
            continue
        lines += ["", f"Stage breakdown, {name} (mean per document unless marked per batch):", ""]
        lines += ["| stage | mean ms | share |", "| --- | ---: | ---: |"]
        lines += [f"| {s['stage']} | {s['mean_ms']:.1f} | {s['share']:.1%} |" for s in run["stages"]]
    return "\n".join(lines)
