"""/metrics, /healthz and /readyz for the exactly-once worker, which has no Faust web server.

The same answers as the Faust app's pages (streams/workers/faust_app.py): a plain threaded HTTP server, because
the worker's loop is synchronous and the broker probes block anyway.

/metrics answers from the registry at once: the ready gauge and the lag come from a thread that asks
the broker every REFRESH_S, as the Faust app's timer does. Asked on the scrape, three broker round
trips under load outlasted a short scrape timeout, and Prometheus counted the live worker as down.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from streams import metrics
from streams.flow.pipeline import Pipeline
from streams.observe.health import BrokerProbe, Readiness, check_readiness
from streams.settings import Settings

log = logging.getLogger(__name__)

Assignment = Callable[[], set[tuple[str, int]]]
REFRESH_S = 5.0


class OperationsServer:
    def __init__(self, settings: Settings, pipeline: Pipeline, assigned: Assignment) -> None:
        self.probe = BrokerProbe(settings)
        self.pipeline = pipeline
        self.assigned = assigned
        self.httpd = ThreadingHTTPServer(("0.0.0.0", settings.worker.web_port), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="operations-http", daemon=True)
        self.stopped = threading.Event()
        self.refresher = threading.Thread(target=self._refresh_until_stopped, name="operations-refresh", daemon=True)

    @classmethod
    def start(cls, settings: Settings, pipeline: Pipeline, assigned: Assignment) -> OperationsServer | None:
        if settings.worker.web_port <= 0:
            return None
        server = cls(settings, pipeline, assigned)
        server.thread.start()
        server.refresher.start()
        return server

    def stop(self) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.refresher.join()
        self.probe.close()

    def readiness(self) -> Readiness:
        return check_readiness(self.assigned(), self.pipeline.engine, self.probe.reachable())

    def _refresh_until_stopped(self) -> None:
        while not self.stopped.is_set():
            self.readiness()
            try:  # a broker hiccup leaves the gauge as it was
                metrics.set_consumer_lag(self.probe.lag(self.assigned()))
            except Exception as exc:
                log.warning("could not read consumer lag: %s", exc)
            self.stopped.wait(REFRESH_S)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._send(200, metrics.render(), "text/plain; version=0.0.4")
                elif self.path == "/healthz":
                    self._json(200, {"alive": True})
                elif self.path == "/readyz":
                    state = server.readiness()
                    self._json(200 if state.ready else 503, state.body())
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _json(self, status: int, body: dict) -> None:
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # scrapes every few seconds would bury the worker's own log

        return Handler
