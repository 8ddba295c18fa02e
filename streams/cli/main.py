"""`seqstream ...`: the worker, topic set-up and ACLs, producing, file extraction and schema export; reading
the topics back is in follow.py, the sinks in sink.py.

The tooling (demo, corpus, accuracy table, benchmarks, demo-model training) is `seqstream-ops` (ops/cli.py).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streams.cli.follow import alerts, audit, tail
from streams.cli.process import stop_on_signals
from streams.cli.review import review
from streams.cli.sink import sink
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
    from model import settle_heap
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
    settle_heap()
    # Either driver: an alert when an output partition is short of in-sync replicas.
    ReplicationWatch(settings).start()
    if settings.worker.delivery == "exactly_once":
        _run_transactional(settings, pipeline)
        return
    import faust

    from streams.kafka.client_log import quiet_python_clients
    from streams.kafka.membership import membership
    from streams.observe.http import worker_server
    from streams.workers.faust_app import RawAssignment, create_app

    # Held until the process ends: its slot lock keeps the group instance id this worker's.
    member = membership(settings.kafka.group_instance_id, settings.worker.app_id)
    log.info("joining group %s as instance %s", settings.worker.app_id, member.instance_id or "dynamic")
    app = create_app(settings, pipeline, member.instance_id)
    worker_server(settings, engine, RawAssignment(app, settings.topics.raw))
    quiet_python_clients()
    faust.Worker(app, loglevel=settings.worker.log_level.upper(), quiet=True).execute_from_commandline()
    member.release()


def _run_transactional(settings: Settings, pipeline: Pipeline) -> None:
    from streams.workers.transactional import TransactionalWorker

    TransactionalWorker(settings, pipeline).run(stop_on_signals())


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
    received_at = datetime.now(UTC)
    batches = [
        [Inbound(str(file), 0, start + i, None, line, received_at, fetched_at) for i, line in enumerate(chunk)]
        for start in range(0, len(lines), size)
        if (chunk := lines[start : start + size])
    ]
    # One batch prepared ahead (decoded, tokenised, grammars built) on its own thread while the model
    # runs the one before: a single slot, so at most two batches are held.
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
    try:
        pending = ahead.submit(driver.take, batches[0]) if batches else None
        for index in range(len(batches)):
            started = time.monotonic()
            taken = pending.result()
            waited_s = time.monotonic() - started
            if index + 1 < len(batches):
                pending = ahead.submit(driver.take, batches[index + 1])
            processed = driver.finish(taken, waited_s)
            for out in processed.outgoing:
                record = {"topic": out.topic, "record": json.loads(out.value)}
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            driver.delivered(processed, started, time.monotonic() - started)
    finally:
        ahead.shutdown(cancel_futures=True)
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


cli.add_command(tail)
cli.add_command(alerts)
cli.add_command(audit)
cli.add_command(sink)
cli.add_command(review)


def main() -> None:
    cli(prog_name="seqstream")


if __name__ == "__main__":
    main()
