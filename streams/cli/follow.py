"""`seqstream tail`, `alerts` and `audit`: the commands that read an output topic back for a person."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from streams.settings import Settings


@click.command()
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

    settings: Settings = ctx.obj
    for message in consume(
        settings, [topic], from_beginning=from_beginning, idle_timeout=idle_timeout, max_messages=max_messages
    ):
        value = message.value()
        click.echo(value.decode("utf-8", "replace") if raw_json else describe(topic, settings.topics, value))


@click.command()
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

    settings: Settings = ctx.obj
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


@click.command()
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

    settings: Settings = ctx.obj
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
