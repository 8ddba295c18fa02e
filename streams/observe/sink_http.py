"""/metrics for `seqstream sink postgres`: its lag and the records it applied, for Prometheus.

The lag is the operator's definition, as for the worker (streams/observe/health.py): log end offset
minus the sink group's committed offset, per partition this sink holds. The sink commits its group's
offsets right after each database commit, so they trail the database by at most one poll. A thread
asks the broker every REFRESH_S; a scrape only renders the registry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from streams import metrics
from streams.observe.health import BrokerProbe
from streams.settings import Settings

log = logging.getLogger(__name__)

REFRESH_S = 5.0


class SinkMetricsServer:
    def __init__(self, settings: Settings, assigned: Callable[[], set[tuple[str, int]]]) -> None:
        self.probe = BrokerProbe(settings, group_id=settings.sink.group_id)
        self.assigned = assigned
        self.stopped = threading.Event()
        self.httpd = ThreadingHTTPServer(("0.0.0.0", settings.sink.metrics_port), _MetricsHandler)
        self.threads = [
            threading.Thread(target=self.httpd.serve_forever, name="sink-metrics-http", daemon=True),
            threading.Thread(target=self._refresh_until_stopped, name="sink-metrics-refresh", daemon=True),
        ]

    @classmethod
    def start(cls, settings: Settings, assigned: Callable[[], set[tuple[str, int]]]) -> SinkMetricsServer | None:
        if settings.sink.metrics_port <= 0:
            return None
        server = cls(settings, assigned)
        for thread in server.threads:
            thread.start()
        return server

    def stop(self) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        for thread in self.threads:
            thread.join()
        self.probe.close()

    def _refresh_until_stopped(self) -> None:
        while not self.stopped.is_set():
            try:  # a broker hiccup leaves the gauge as it was
                metrics.set_consumer_lag(self.probe.lag(self.assigned()), metrics.SINK_LAG)
            except Exception as exc:
                log.warning("could not read the sink's lag: %s", exc)
            self.stopped.wait(REFRESH_S)


class _MetricsHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/metrics":
            status, body, kind = 200, metrics.render(metrics.SINK_REGISTRY), "text/plain; version=0.0.4"
        else:
            status, body, kind = 404, b"not found\n", "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # scrapes every few seconds would bury the sink's own log
