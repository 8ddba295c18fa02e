"""librdkafka's log lines as Python logging: one clear WARNING per event, not a line per retry.

Without a `logger`, librdkafka prints straight to stderr (`%0|...|FATAL|...`, `%3|...|FAIL|...`,
`%4|...|GETPID|... Coordinator load in progress`): while a broker restarts or leadership moves that
is hundreds of lines for one event our code already handles (it retries, rewinds, or replaces the
producer and says so). Here each line is forwarded to the `seqstream.kafka.client` logger: the
first of its kind (client, facility) in a window as a WARNING that names the client, the later ones
of the window at DEBUG, and the count of those with the next WARNING.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

LOGGER_NAME = "seqstream.kafka.client"
# One event (a broker restart, a leader election) lasts seconds to a minute.
WINDOW_S = 60.0
# librdkafka's syslog levels: 0-2 emergency/alert/critical, 3 error, 4 warning, 5 notice, 6 info, 7 debug.
WARNING_SYSLOG_LEVEL = 4


class ClientLog:
    """What confluent-kafka's `logger` setting takes: it calls `log(level, "%s [%s] %s", fac, name, text)`."""

    def __init__(self, logger: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger or logging.getLogger(LOGGER_NAME)
        self.clock = clock
        # (client, facility) -> (when its window opened, lines held back at DEBUG since)
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()  # librdkafka calls in from its own threads

    def log(self, level: int, fmt: str, *args: object) -> None:
        facility, client, text = (str(a) for a in args) if len(args) == 3 else ("", "", fmt % args)
        if level < logging.WARNING:  # notices and info lines: debugging material
            self.logger.debug("%s %s: %s", client, facility, text)
            return
        now = self.clock()
        with self._lock:
            opened, held = self._windows.get((client, facility), (None, 0))
            if opened is not None and now - opened < WINDOW_S:
                self._windows[(client, facility)] = (opened, held + 1)
                self.logger.debug("%s %s: %s", client, facility, text)
                return
            self._windows[(client, facility)] = (now, 0)
        more = f" ({held} more like it in the last window, at DEBUG)" if held else ""
        self.logger.warning(
            "Kafka client %s: %s %s (librdkafka; the client retries, further lines for %.0f s at DEBUG)%s",
            client,
            facility,
            text,
            WINDOW_S,
            more,
        )


# One for the process: the windows count across every client of it.
CLIENT_LOG = ClientLog()
