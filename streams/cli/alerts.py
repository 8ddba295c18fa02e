"""`seqstream alerts`: the alerts topic as a live table, each alert optionally POSTed to a webhook.

A terminal gets a rich table redrawn in place; a pipe or a file gets one line per alert, so the
output can be grepped and logged.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass

import msgspec
from rich.console import Console
from rich.live import Live
from rich.table import Table

from schemas.messages import AlertRecord
from streams.kafka.clients import consume
from streams.settings import AlertSettings, Settings

log = logging.getLogger(__name__)

_decoder = msgspec.json.Decoder(AlertRecord)
TABLE_ROWS = 30


@dataclass(frozen=True)
class AlertRow:
    raised_at: str
    document: str
    kind: str
    severity: str
    step: str
    entropy: str
    chosen: str
    alternatives: str
    message: str

    COLUMNS = ("raised", "document", "kind", "severity", "step", "entropy", "chosen", "alternatives", "message")

    def cells(self) -> tuple[str, ...]:
        return (
            self.raised_at,
            self.document,
            self.kind,
            self.severity,
            self.step,
            self.entropy,
            self.chosen,
            self.alternatives,
            self.message,
        )


def alert_row(alert: AlertRecord) -> AlertRow:
    """The alert's headline: for an entropy alert, its worst step (the record keeps the worst few)."""
    step = entropy = chosen = alternatives = "-"
    if alert.alarms:
        worst = max(alert.alarms, key=lambda a: (a.entropy_nats, -a.chunk, -a.step))
        step = f"prompt {worst.chunk} step {worst.step}"
        if alert.alarmed_steps > 1:
            step += f" (+{alert.alarmed_steps - 1})"
        entropy = f"{worst.entropy_nats:.2f} > {worst.threshold:g}"
        chosen = f"{worst.chosen.text!r} {worst.chosen.prob:.3f}"
        alternatives = " ".join(f"{c.text!r} {c.prob:.3f}" for c in worst.alternatives)
    return AlertRow(
        raised_at=alert.raised_at.strftime("%H:%M:%S"),
        document=alert.doc_id or "-",
        kind=alert.kind,
        severity=alert.severity,
        step=step,
        entropy=entropy,
        chosen=chosen,
        alternatives=alternatives,
        message=alert.message,
    )


def alerts_table(rows: deque[AlertRow] | list[AlertRow]) -> Table:
    table = Table(title="SeqStream alerts (newest last)", expand=True)
    for column in AlertRow.COLUMNS:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row.cells(), style="red" if row.severity == "critical" else None)
    return table


def post_alert(settings: AlertSettings, value: bytes) -> None:
    """POST the alert record's JSON, bytes as on the topic; raises after the last failed attempt."""
    for attempt in range(settings.webhook_attempts):
        request = urllib.request.Request(
            settings.webhook_url, data=value, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=settings.webhook_timeout_s):
                return  # urlopen raises HTTPError for every status >= 400
        except (urllib.error.URLError, OSError):
            if attempt + 1 == settings.webhook_attempts:
                raise
            time.sleep(0.2 * 2**attempt)


def _print_line(console: Console, cells: tuple[str, ...]) -> None:
    # Tab-separated and unstyled (rich would expand the tabs): easy to cut, grep and log.
    console.file.write("\t".join(cell.replace("\t", " ") for cell in cells) + "\n")
    console.file.flush()


def follow_alerts(
    settings: Settings,
    *,
    from_beginning: bool,
    max_messages: int | None,
    idle_timeout: float | None,
    console: Console | None = None,
) -> tuple[int, int]:
    """Show (and forward) alerts until stopped, idle or enough; returns (shown, webhook failures)."""
    console = console or Console()
    rows: deque[AlertRow] = deque(maxlen=TABLE_ROWS)
    shown = failures = 0
    live = Live(alerts_table(rows), console=console, auto_refresh=False) if console.is_terminal else None
    if live is None:
        _print_line(console, AlertRow.COLUMNS)
    try:
        if live is not None:
            live.start()
        messages = consume(
            settings,
            [settings.topics.alerts],
            from_beginning=from_beginning,
            idle_timeout=idle_timeout,
            max_messages=max_messages,
        )
        for message in messages:
            value = message.value()
            try:
                row = alert_row(_decoder.decode(value))
            except msgspec.DecodeError as exc:
                row = AlertRow("-", "-", "unreadable", "-", "-", "-", "-", "-", str(exc))
            shown += 1
            rows.append(row)
            if live is not None:
                live.update(alerts_table(rows), refresh=True)
            else:
                _print_line(console, row.cells())
            if settings.alerts.webhook_url:
                try:
                    post_alert(settings.alerts, value)
                except (urllib.error.URLError, OSError) as exc:
                    failures += 1
                    log.error("webhook %s did not take alert of %s: %s", settings.alerts.webhook_url, row.document, exc)
    finally:
        if live is not None:
            live.stop()
    return shown, failures
