"""`seqstream review ...`: the review desk, where people clear the review topic."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from streams.settings import Settings


@click.group()
def review() -> None:
    """Clear the review topic by hand."""


@review.command("serve")
@click.option("--host", help="Address to listen on (default: SEQSTREAM_REVIEW__HOST, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default: SEQSTREAM_REVIEW__PORT, 8088).")
@click.option(
    "--instance",
    help=(
        "This desk's name, stable across its restarts and its own among the desks: its transactions' id and "
        "its group.instance.id (default: host name and port)."
    ),
)
@click.pass_context
def review_serve(ctx: click.Context, host: str | None, port: int | None, instance: str | None) -> None:
    """Serve the review desk: sign in with SEQSTREAM_REVIEW__SECRET, decide records, send them to fields."""
    from streams.review.serve import serve

    settings: Settings = ctx.obj
    settings.review.host = host or settings.review.host
    settings.review.port = port or settings.review.port
    if not settings.review.secret:
        raise click.ClickException("set SEQSTREAM_REVIEW__SECRET: reviewers sign in with it")
    serve(settings, instance or f"{socket.gethostname()}-{settings.review.port}")
