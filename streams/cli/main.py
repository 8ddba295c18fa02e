"""`seqstream ...`: the worker, topic set-up and ACLs, producing, tailing, file extraction and schema export.

The tooling (demo, corpus, accuracy table, benchmarks, demo-model training) is `seqstream-ops` (ops/cli.py).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streams.settings import Settings, load_settings

if TYPE_CHECKING:
    from model import Engine
    from streams.flow.pipeline import Pipeline

log = logging.getLogger("seqstream")


def _settings(ctx: click.Context) -> Settings:
    return ctx.obj


_bootstrap_option = click.option(
    "--bootstrap", envvar="KAFKA_BOOTSTRAP_SERVERS", help="Kafka bootstrap servers (host:port[,host:port])."
)
_model_option = click.option("--model", "model_path", help="Model directory or hub id (default: DAMO-NLP/SeqGPT-560M).")


def settings_options(command: Callable) -> Callable:
    """`--bootstrap` and `--model`, the global options of `seqstream` and `seqstream-ops` alike."""
    return _bootstrap_option(_model_option(command))


@click.group()
@settings_options
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None, model_path: str | None) -> None:
    """SeqStream: real-time document extraction on Kafka."""
    ctx.obj = configure(bootstrap, model_path)


def configure(bootstrap: str | None, model_path: str | None) -> Settings:
    """The settings of a command line (options over environment), with logging set up by them."""
    try:
        settings = load_settings(kafka={"bootstrap_servers": bootstrap}, model={"path": model_path})
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    logging.basicConfig(
        level=settings.worker.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return settings


@cli.command()
@click.option("--create-topics/--no-create-topics", default=True, help="Create missing topics at start-up.")
@click.pass_context
def worker(ctx: click.Context, create_topics: bool) -> None:
    """Consume the raw topic and extract fields until stopped."""
    from streams.flow.pipeline import Pipeline
    from streams.kafka.replication import ReplicationWatch
    from streams.kafka.topics import ReplicationError
    from streams.kafka.topics import create_topics as make_topics

    settings = _settings(ctx)
    engine = engine_for(settings)
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

    from streams.kafka.membership import membership
    from streams.observe.http import worker_server
    from streams.workers.faust_app import RawAssignment, create_app

    # Held until the process ends: its slot lock keeps the group instance id this worker's.
    member = membership(settings.kafka.group_instance_id, settings.worker.app_id)
    log.info("joining group %s as instance %s", settings.worker.app_id, member.instance_id or "dynamic")
    app = create_app(settings, pipeline, member.instance_id)
    worker_server(settings, engine, RawAssignment(app, settings.topics.raw))
    faust.Worker(app, loglevel=settings.worker.log_level.upper(), quiet=True).execute_from_commandline()
    member.release()


def _run_transactional(settings: Settings, pipeline: Pipeline) -> None:
    from streams.workers.transactional import TransactionalWorker

    TransactionalWorker(settings, pipeline).run(_stop_on_signals())


def _stop_on_signals() -> threading.Event:
    """Set by SIGTERM (docker stop, Kubernetes) and Ctrl-C: a loop finishes the batch in hand,
    commits, and closes (a static member keeps its place in the group for its return)."""
    import signal

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


@cli.group()
def topics() -> None:
    """Manage the pipeline's six topics (raw, fields, review, alerts, dead-letter, audit)."""


@topics.command("create")
@click.pass_context
def topics_create(ctx: click.Context) -> None:
    """Create the six topics if missing: raw, fields, review, alerts, dead-letter and audit."""
    from streams.kafka.topics import ReplicationError, create_topics

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

    from streams.kafka.acls import grant_worker_acls

    for binding in grant_worker_acls(_settings(ctx), principal):
        prefixed = "*" if binding.resource_pattern_type == ResourcePatternType.PREFIXED else ""
        click.echo(f"allow {binding.operation.name:6} {binding.restype.name.lower()} {binding.name}{prefixed}")


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topic", help="Topic to publish to (default: the raw topic).")
@click.pass_context
def produce(ctx: click.Context, file: Path, topic: str | None) -> None:
    """Publish each line of a JSONL file, bytes untouched, keyed by its doc_id where it has one."""
    from streams.kafka.clients import produce_lines

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
    from streams.cli.show import describe
    from streams.kafka.clients import consume

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
    from streams.cli.alerts import follow_alerts

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
    from streams.cli.show import describe_audit
    from streams.kafka.clients import consume

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
    from streams.flow.driver import BatchDriver
    from streams.flow.pipeline import Pipeline
    from streams.kafka.inbound import Inbound

    settings = _settings(ctx)
    driver = BatchDriver(Pipeline(engine_for(settings), settings), settings.topics, settled="written")
    lines = file.read_bytes().splitlines()
    fetched_at = time.monotonic()
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    size = settings.batch.max_documents
    try:
        for start in range(0, len(lines), size):
            started = time.monotonic()
            chunk = lines[start : start + size]
            received_at = datetime.now(UTC)
            batch = [
                Inbound(str(file), 0, start + i, None, line, received_at, fetched_at) for i, line in enumerate(chunk)
            ]
            processed = driver.process(batch)
            for out in processed.outgoing:
                record = {"topic": out.topic, "record": json.loads(out.value)}
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            driver.delivered(processed, started, time.monotonic() - started)
    finally:
        if output:
            sink.close()


@cli.group()
def sink() -> None:
    """Copy an output topic into another system."""


@sink.command("postgres")
@click.option("--dsn", help="PostgreSQL connection string (default: SEQSTREAM_SINK__DSN, else libpq's PG* variables).")
@click.pass_context
def sink_postgres(ctx: click.Context, dsn: str | None) -> None:
    """Upsert the fields topic into PostgreSQL (doc_fields, field_values) until stopped, exactly once in effect."""
    try:
        import psycopg  # an optional extra: say which, not a traceback
    except ImportError as exc:
        raise click.ClickException(
            f"`seqstream sink postgres` needs psycopg 3: pip install 'seqstream[postgres]' ({exc})"
        ) from None
    from streams.observe.http import sink_server
    from streams.sinks.consumer import SinkConsumer
    from streams.sinks.postgres import PostgresSink

    settings = _settings(ctx)
    if dsn:
        settings.sink.dsn = dsn
    stop = _stop_on_signals()
    sink = SinkConsumer(settings, PostgresSink(settings))
    server = sink_server(settings, lambda: set(sink.checkpoint.assigned))
    try:
        sink.run(stop)
    except psycopg.Error as exc:  # unreachable, refused, not allowed: the server's words, not a traceback
        raise click.ClickException(f"PostgreSQL: {exc}") from None
    finally:
        if server is not None:
            server.stop()


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


def engine_for(settings: Settings) -> Engine:
    """The configured engine, loaded and announced (loudly when it is the demo model)."""
    from model import ModelNotFoundError, build_engine

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
