"""The one HTTP server of every SeqStream process: `/metrics` (prometheus_client's exposition) and,
for a worker, `/healthz` and `/readyz`.

Both workers (Faust and exactly-once) and the PostgreSQL sink start it on their port. /metrics
answers from the registry at once: what needs the broker (the lag gauge, the ready gauge) comes
from a thread that asks every REFRESH_S. Asked on the scrape, three broker round trips under load
outlasted a short scrape timeout, and Prometheus counted a live worker as down.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from streams import metrics
from streams.observe.health import BrokerProbe, Readiness, check_readiness
from streams.settings import Settings

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

    from model import Engine

log = logging.getLogger(__name__)

Assignment = Callable[[], set[tuple[str, int]]]
REFRESH_S = 5.0


class OperationsServer:
    """`/metrics` of `registry`; `/healthz` and `/readyz` where `readiness` is given. `refresh` runs
    on a thread of its own every REFRESH_S until the server stops."""

    def __init__(
        self,
        port: int,
        registry: CollectorRegistry,
        refresh: Callable[[], None],
        readiness: Callable[[], Readiness] | None = None,
        closing: Iterable[Callable[[], None]] = (),
    ) -> None:
        self.refresh = refresh
        self.readiness = readiness
        self.closing = list(closing)
        self.metrics_app = make_wsgi_app(registry)
        self.httpd = make_server("0.0.0.0", port, self._app, _Server, _QuietHandler)
        self.stopped = threading.Event()
        self.threads = [
            threading.Thread(target=self.httpd.serve_forever, name="operations-http", daemon=True),
            threading.Thread(target=self._refresh_until_stopped, name="operations-refresh", daemon=True),
        ]

    def start(self) -> OperationsServer:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for thread in self.threads:
            thread.join()
        for close in self.closing:
            close()

    def _refresh_until_stopped(self) -> None:
        while not self.stopped.is_set():
            try:  # a broker hiccup leaves the gauges as they were
                self.refresh()
            except Exception as exc:
                log.warning("could not refresh the broker's figures: %s", exc)
            self.stopped.wait(REFRESH_S)

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return self.metrics_app(environ, start_response)
        if self.readiness is not None and path == "/healthz":
            return _json(start_response, 200, {"alive": True})
        if self.readiness is not None and path == "/readyz":
            state = self.readiness()
            return _json(start_response, 200 if state.ready else 503, state.body())
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]


def worker_server(settings: Settings, engine: Engine, assigned: Assignment) -> OperationsServer | None:
    """A worker's pages on `worker.web_port` (0 = none): its metrics, lag of `assigned` and readiness."""
    if settings.worker.web_port <= 0:
        return None
    probe = BrokerProbe(settings)

    def readiness() -> Readiness:
        return check_readiness(assigned(), engine, probe.reachable())

    def refresh() -> None:
        readiness()  # the ready gauge must be fresh for Prometheus on its own, not only on /readyz
        metrics.set_consumer_lag(probe.lag(assigned()))

    return OperationsServer(settings.worker.web_port, metrics.REGISTRY, refresh, readiness, [probe.close]).start()


def sink_server(settings: Settings, assigned: Assignment) -> OperationsServer | None:
    """The PostgreSQL sink's /metrics on `sink.metrics_port` (0 = none): records applied, and its lag
    (log end offset minus the sink group's committed offset, which trails the database by one poll)."""
    if settings.sink.metrics_port <= 0:
        return None
    probe = BrokerProbe(settings, group_id=settings.sink.group_id)

    def refresh() -> None:
        metrics.set_consumer_lag(probe.lag(assigned()), metrics.SINK_LAG)

    return OperationsServer(settings.sink.metrics_port, metrics.SINK_REGISTRY, refresh, None, [probe.close]).start()


def _json(start_response: StartResponse, status: int, body: dict) -> list[bytes]:
    reason = {200: "OK", 503: "Service Unavailable"}[status]
    start_response(f"{status} {reason}", [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # scrapes every few seconds would bury the process's own log
