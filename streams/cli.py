"""`seqstream ...`: the worker, topic set-up, producing, tailing, file extraction and the demo."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streams.settings import Settings, load_settings

if TYPE_CHECKING:
    from streams.pipeline import Pipeline

log = logging.getLogger("seqstream")


def _settings(ctx: click.Context) -> Settings:
    return ctx.obj


@click.group()
@click.option("--bootstrap", envvar="KAFKA_BOOTSTRAP_SERVERS", help="Kafka bootstrap servers (host:port[,host:port]).")
@click.option("--model", "model_path", help="Model directory or hub id (default: DAMO-NLP/SeqGPT-560M).")
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None, model_path: str | None) -> None:
    """SeqStream: real-time document extraction on Kafka."""
    try:
        ctx.obj = load_settings(kafka={"bootstrap_servers": bootstrap}, model={"path": model_path})
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    logging.basicConfig(
        level=ctx.obj.worker.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@cli.command()
@click.option("--create-topics/--no-create-topics", default=True, help="Create missing topics at start-up.")
@click.pass_context
def worker(ctx: click.Context, create_topics: bool) -> None:
    """Consume the raw topic and extract fields until stopped."""
    from streams.pipeline import Pipeline
    from streams.replication import ReplicationWatch
    from streams.topics import ReplicationError
    from streams.topics import create_topics as make_topics

    settings = _settings(ctx)
    engine = _engine(settings)
    if create_topics:
        try:
            make_topics(settings)
        except ReplicationError as exc:
            raise click.ClickException(str(exc)) from None
    pipeline = Pipeline(engine, settings)
    # Either driver: an alert when an output partition is short of in-sync replicas.
    ReplicationWatch(settings).start()
    if settings.worker.delivery == "exactly_once":
        _run_transactional(settings, pipeline)
        return
    import faust

    from streams.app import create_app

    app = create_app(settings, pipeline)
    faust.Worker(app, loglevel=settings.worker.log_level.upper(), quiet=True).execute_from_commandline()


def _run_transactional(settings: Settings, pipeline: Pipeline) -> None:
    import signal
    import threading

    from streams.transactional import TransactionalWorker

    stop = threading.Event()
    # SIGTERM (docker stop, Kubernetes) and Ctrl-C: finish the batch in hand, commit, leave the group.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    TransactionalWorker(settings, pipeline).run(stop)


@cli.group()
def topics() -> None:
    """Manage the pipeline's topics."""


@topics.command("create")
@click.pass_context
def topics_create(ctx: click.Context) -> None:
    """Create the raw, fields, review, alerts and dead-letter topics if missing."""
    from streams.topics import ReplicationError, create_topics

    try:
        outcomes = create_topics(_settings(ctx))
    except ReplicationError as exc:
        raise click.ClickException(str(exc)) from None
    for name, outcome in outcomes.items():
        click.echo(f"{outcome:8} {name}")


@cli.group()
def acls() -> None:
    """Manage the ACLs of a broker that enforces them."""


@acls.command("grant")
@click.argument("principal")
@click.pass_context
def acls_grant(ctx: click.Context, principal: str) -> None:
    """Give PRINCIPAL (e.g. User:seqstream-worker) exactly the ACLs a worker needs; run as an admin."""
    from confluent_kafka.admin import ResourcePatternType

    from streams.acls import grant_worker_acls

    for binding in grant_worker_acls(_settings(ctx), principal):
        prefixed = "*" if binding.resource_pattern_type == ResourcePatternType.PREFIXED else ""
        click.echo(f"allow {binding.operation.name:6} {binding.restype.name.lower()} {binding.name}{prefixed}")


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topic", help="Topic to publish to (default: the raw topic).")
@click.pass_context
def produce(ctx: click.Context, file: Path, topic: str | None) -> None:
    """Publish each line of a JSONL file, bytes untouched, keyed by its doc_id where it has one."""
    from streams.kafka_io import produce_lines

    settings = _settings(ctx)
    lines = file.read_bytes().splitlines()
    sent = produce_lines(settings, topic or settings.topics.raw, lines, progress=True)
    click.echo(f"published {sent} messages to {topic or settings.topics.raw}")


@cli.command()
@click.argument("topic")
@click.option("--from-beginning/--latest", default=True)
@click.option("--max-messages", type=int, default=None, help="Stop after this many messages.")
@click.option("--idle-timeout", type=float, default=None, help="Stop after this many seconds without a message.")
@click.option("--raw", "raw_json", is_flag=True, help="Print the records as JSON lines.")
@click.pass_context
def tail(
    ctx: click.Context,
    topic: str,
    from_beginning: bool,
    max_messages: int | None,
    idle_timeout: float | None,
    raw_json: bool,
) -> None:
    """Follow a topic and print its records readably."""
    from streams.kafka_io import consume
    from streams.show import describe

    settings = _settings(ctx)
    for message in consume(
        settings, [topic], from_beginning=from_beginning, idle_timeout=idle_timeout, max_messages=max_messages
    ):
        value = message.value()
        click.echo(value.decode("utf-8", "replace") if raw_json else describe(topic, settings.topics, value))


@cli.command()
@click.option("--from-beginning/--latest", default=False, help="Replay the topic, or show only new alerts.")
@click.option("--max-messages", type=int, default=None, help="Stop after this many alerts.")
@click.option("--idle-timeout", type=float, default=None, help="Stop after this many seconds without an alert.")
@click.option("--webhook", help="POST each alert's JSON here (default: SEQSTREAM_ALERTS__WEBHOOK_URL).")
@click.pass_context
def alerts(
    ctx: click.Context, from_beginning: bool, max_messages: int | None, idle_timeout: float | None, webhook: str | None
) -> None:
    """Follow the alerts topic as a live table (document, kind, step, entropy, chosen token, alternatives)."""
    from streams.alerts import follow_alerts

    settings = _settings(ctx)
    if webhook:
        settings.alerts.webhook_url = webhook
    shown, failures = follow_alerts(
        settings, from_beginning=from_beginning, max_messages=max_messages, idle_timeout=idle_timeout
    )
    click.echo(
        f"{shown} alerts shown"
        + (f", forwarded to {settings.alerts.webhook_url}" if settings.alerts.webhook_url else ""),
        err=True,
    )
    if failures:
        raise click.ClickException(f"{failures} alerts could not be delivered to the webhook")


@cli.command()
@click.argument("doc_id")
@click.option("--idle-timeout", type=float, default=5.0, show_default=True, help="Seconds of silence = end of topic.")
@click.option("--raw", "raw_json", is_flag=True, help="Print the audit record as JSON.")
@click.pass_context
def audit(ctx: click.Context, doc_id: str, idle_timeout: float, raw_json: bool) -> None:
    """Print the per-token decode trace behind DOC_ID's latest record (needs SEQSTREAM_WORKER__AUDIT=true)."""
    import msgspec

    from schemas.messages import AuditRecord
    from streams.kafka_io import consume
    from streams.show import describe_audit

    settings = _settings(ctx)
    key = doc_id.encode()
    latest = None
    # Compacted and keyed by doc_id: the last record with the key is the current trace.
    for message in consume(settings, [settings.topics.audit], idle_timeout=idle_timeout):
        if message.key() == key:
            latest = message.value()
    if latest is None:
        raise click.ClickException(f"no audit record for {doc_id!r} on {settings.topics.audit}")
    record = msgspec.json.decode(latest, type=AuditRecord)
    click.echo(latest.decode() if raw_json else describe_audit(record))


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="JSONL out (default: stdout).")
@click.pass_context
def extract(ctx: click.Context, file: Path, output: Path | None) -> None:
    """Run the engine on a JSONL file of raw documents, with no Kafka: JSONL in, JSONL out."""
    from streams.pipeline import Pipeline
    from streams.routing import Inbound

    settings = _settings(ctx)
    pipeline = Pipeline(_engine(settings), settings)
    now = datetime.now(UTC)
    lines = file.read_bytes().splitlines()
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    size = settings.batch.max_documents
    try:
        for start in range(0, len(lines), size):
            batch = [
                Inbound(topic=str(file), partition=0, offset=start + i, key=None, value=line, received_at=now)
                for i, line in enumerate(lines[start : start + size])
            ]
            for out in pipeline.process_batch(batch):
                record = {"topic": out.topic, "record": json.loads(out.value)}
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        if output:
            sink.close()


@cli.group()
def schemas() -> None:
    """The JSON Schemas of every message."""


@schemas.command("export")
@click.option("--directory", type=click.Path(file_okay=False, path_type=Path), default=None)
def schemas_export(directory: Path | None) -> None:
    """Write the JSON Schema files (default: schemas/json/)."""
    from schemas.export import JSON_DIR, export_schemas

    for path in export_schemas(directory or JSON_DIR):
        click.echo(f"wrote {path}")


@cli.group()
def bench() -> None:
    """Measurements on a real broker and worker processes (each prints what it measured)."""


@bench.command("soak")
@click.option("--minutes", type=float, default=10.0, show_default=True, help="How long to publish at --rate.")
@click.option("--burst", type=int, default=2000, show_default=True, help="Documents published at once first.")
@click.option("--rate", type=float, default=20.0, show_default=True, help="Documents per second after the burst.")
@click.option("--text-chars", type=int, default=2000, show_default=True, help="Characters of text per document.")
@click.option("--sample-s", type=float, default=10.0, show_default=True, help="Seconds between samples.")
@click.option("--drain-timeout", type=float, default=600.0, show_default=True, help="Seconds allowed to drain.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("var/soak/worker.log"))
@click.pass_context
def bench_soak(
    ctx: click.Context,
    minutes: float,
    burst: int,
    rate: float,
    text_chars: int,
    sample_s: float,
    drain_timeout: float,
    log_path: Path,
) -> None:
    """Flood a worker of its own: throughput, lag and RSS over time, then every document accounted for."""
    from ops.soak import run_soak

    result = run_soak(
        _settings(ctx),
        minutes=minutes,
        burst=burst,
        rate=rate,
        text_chars=text_chars,
        sample_s=sample_s,
        drain_timeout_s=drain_timeout,
        log_path=log_path,
        echo=click.echo,
    )
    if result.lost or not result.worker_alive:
        raise click.ClickException(f"{result.lost} documents not answered; worker alive: {result.worker_alive}")


@cli.command()
@click.option("--documents", type=int, default=20, help="How many sample documents to publish.")
@click.option("--keep-running", is_flag=True, help="Leave broker and worker running after showing results.")
@click.pass_context
def demo(ctx: click.Context, documents: int, keep_running: bool) -> None:
    """Start everything on this machine (broker, topics, worker), publish samples, show the results."""
    from streams.demo import run_demo

    run_demo(_settings(ctx), documents=documents, keep_running=keep_running)


@bench.command("pipeline")
@click.option("--documents", type=int, default=64, show_default=True, help="Corpus size per run.")
@click.option("--max-new-tokens", type=int, default=32, show_default=True)
@click.option("--batch-sizes", default="1,4,16,32", show_default=True, help="Burst runs; 1 is the naive design.")
@click.option("--windows-ms", default="5,50,200", show_default=True, help="Paced runs at --window-batch.")
@click.option("--window-batch", type=int, default=32, show_default=True)
@click.option("--rate", type=float, default=None, help="Paced arrival rate, docs/s (default: half the burst rate).")
@click.option("--hidden-size", type=int, default=256, show_default=True, help="Of the random BLOOM model built.")
@click.option("--layers", type=int, default=4, show_default=True)
@click.option(
    "--engine",
    type=click.Choice(["reference", "fast"]),
    default="reference",
    show_default=True,
    help="For every run; reference is transformers' generate(), what the naive design calls.",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("ops/bench"))
@click.pass_context
def bench_pipeline(
    ctx: click.Context,
    documents: int,
    max_new_tokens: int,
    batch_sizes: str,
    windows_ms: str,
    window_batch: int,
    rate: float | None,
    hidden_size: int,
    layers: int,
    engine: str,
    out_dir: Path,
) -> None:
    """Throughput, latency percentiles and stage breakdown; micro-batched beside naive; PNG plots."""
    import os

    from ops.bench_pipeline import BenchPlan, report_markdown, run_benchmark

    plan = BenchPlan(
        documents=documents,
        max_new_tokens=max_new_tokens,
        batch_sizes=tuple(int(x) for x in batch_sizes.split(",") if x),
        windows_ms=tuple(float(x) for x in windows_ms.split(",") if x),
        window_batch=window_batch,
        rate_per_s=rate,
        hidden_size=hidden_size,
        n_layer=layers,
        engine=engine,
    )
    # A broker named anywhere (option or environment) is used; otherwise the benchmark starts its own.
    configured = ctx.find_root().params.get("bootstrap") or "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS" in os.environ
    bootstrap = _settings(ctx).kafka.bootstrap_servers if configured else None
    summary = run_benchmark(plan, out_dir, bootstrap, echo=click.echo)
    click.echo(report_markdown(summary))
    for path in summary["plots"]:
        click.echo(f"wrote {path}")


@cli.group()
def corpus() -> None:
    """Generated documents with ground truth."""


@corpus.command("generate")
@click.option("--count", type=int, default=100, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--noise", type=float, default=0.0, show_default=True, help="OCR-style noise per character.")
@click.option("--long", "long_documents", is_flag=True, help="3,000-30,000 characters: contracts, news, medical.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def corpus_generate(count: int, seed: int, noise: float, long_documents: bool, output: Path) -> None:
    """Write FILE.jsonl (raw documents) and FILE.truth.jsonl (their ground truth)."""
    from ops.corpus.generate import generate_corpus, truth_path, write_corpus

    written = write_corpus(output, generate_corpus(count, seed, noise, long=long_documents))
    click.echo(f"wrote {written} documents to {output} and their ground truth to {truth_path(output)}")


@cli.command("eval")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The corpus (or FILE).")
@click.option("--model", "model_path", help="Model directory or hub id (overrides the global --model).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the table.")
@click.option(
    "--systems",
    "names",
    default=None,
    help="Comma-separated columns to run (default all): product, head only, unconstrained, regex baseline.",
)
@click.pass_context
def eval_accuracy(
    ctx: click.Context,
    file: Path | None,
    data: Path | None,
    model_path: str | None,
    json_out: Path | None,
    names: str | None,
) -> None:
    """Score the engine and its baselines on a generated corpus (FILE.jsonl and its FILE.truth.jsonl)."""
    import msgspec

    from ops.eval_table import as_json, compare, format_table, systems

    corpus = data or file
    if corpus is None:
        raise click.UsageError("give the corpus as FILE or --data FILE")
    settings = _settings(ctx)
    model = msgspec.structs.replace(settings.model, path=model_path) if model_path else settings.model
    wanted = [n.strip() for n in names.split(",")] if names else None
    engines = systems(
        model, lambda engine_settings: _engine(msgspec.structs.replace(settings, model=engine_settings)), wanted
    )
    reports = compare(engines, corpus, settings.batch.max_documents)
    click.echo(format_table(reports))
    if json_out:
        json_out.write_text(json.dumps(as_json(reports, corpus), indent=2, ensure_ascii=False) + "\n")


@cli.group("demo-model")
def demo_model() -> None:
    """Train and export the shipped demo model (model/demo/)."""


@demo_model.command("build")
@click.option(
    "--train-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoints and snapshots (default: ~/.cache/seqstream/demo-train).",
)
@click.option("--stop-after", type=float, default=None, help="Seconds to train in this run; rerun to resume.")
@click.option("--steps", type=int, default=None, help="Train to this step (default: the plan's).")
def demo_model_build(train_dir: Path | None, stop_after: float | None, steps: int | None) -> None:
    """Train the demo model from its seed, resuming from the last checkpoint if there is one.

    --steps beyond the plan's end continues a finished run with a new cosine to that step (recorded
    in the manifest's `schedule`)."""
    from dataclasses import replace

    from ops.demo_model import DEMO_PLAN, TRAIN_DIR, build

    plan = replace(DEMO_PLAN, recipe=replace(DEMO_PLAN.recipe, steps=steps)) if steps else DEMO_PLAN
    snapshot = build(plan, train_dir or TRAIN_DIR, log=click.echo, stop_after_s=stop_after)
    click.echo(f"snapshot: {snapshot}; `seqstream demo-model export` evaluates and ships the best")


@demo_model.command("export")
@click.option(
    "--train-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where `build` wrote its snapshots (default: ~/.cache/seqstream/demo-train).",
)
@click.option("--documents", type=int, default=1000, show_default=True, help="Held-out documents to evaluate on.")
@click.option("--candidates", type=int, default=2, show_default=True, help="How many of the last snapshots to try.")
def demo_model_export(train_dir: Path | None, documents: int, candidates: int) -> None:
    """Evaluate the latest snapshots on a held-out corpus and ship the best to model/demo/."""
    from ops.demo_model import TRAIN_DIR, export_best

    shipped, table = export_best(train_dir or TRAIN_DIR, documents, candidates, log=click.echo)
    click.echo(table)
    click.echo(f"exported to {shipped}")


def _engine(settings: Settings):
    from model.build import build_engine
    from model.runner.loading import ModelNotFoundError

    try:
        engine = build_engine(settings.model, settings.windows)
    except ModelNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    info = engine.info
    log.info(
        "engine %s, model %s, attention %s, %s on %s", info.engine, info.name, info.attention, info.dtype, info.device
    )
    if info.demo:
        log.warning("DEMO MODEL in use (%s): not SeqGPT; its output is for trying the pipeline only", info.name)
    return engine


def main() -> None:
    cli(prog_name="seqstream")


if __name__ == "__main__":
    main()
