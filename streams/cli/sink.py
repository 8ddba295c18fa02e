"""`seqstream sink ...`: an output topic copied into another system, one command per sink."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from streams.cli.process import stop_on_signals

if TYPE_CHECKING:
    from streams.settings import Settings


@click.group()
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

    settings: Settings = ctx.obj
    if dsn:
        settings.sink.dsn = dsn
    stop = stop_on_signals()
    sink = SinkConsumer(settings, PostgresSink(settings))
    server = sink_server(settings, lambda: set(sink.checkpoint.assigned))
    try:
        sink.run(stop)
    except psycopg.Error as exc:  # unreachable, refused, not allowed: the server's words, not a traceback
        raise click.ClickException(f"PostgreSQL: {exc}") from None
    finally:
        if server is not None:
            server.stop()
