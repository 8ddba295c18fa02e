"""librdkafka's log lines as Python logging: one clear WARNING per event, not a line per retry.

Without a `logger`, librdkafka prints straight to stderr (`%0|...|FATAL|...`, `%3|...|FAIL|...`,
`%4|...|GETPID|... Coordinator load in progress`): while a broker restarts or leadership moves that
is hundreds of lines for one event our code already handles (it retries, rewinds, or replaces the
producer and says so). Here each line is forwarded to the `seqstream.kafka.client` logger: the
first of its kind (client, facility) in a window as a WARNING that names the client, the later ones
of the window at DEBUG, and the count of those with the next WARNING.

The Python clients inside Faust (aiokafka) log through Python logging already, but just as often:
`Unable connect to node with id 1` and `Failed fetch messages from 1: NodeNotReadyError` every
100 ms while a broker is away. `quiet_python_clients` gives their loggers the same windows.
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
# What librdkafka says while a broker that just started loads its coordinator state (`GETPID ...
# Failed to acquire idempotence PID from broker ...: Coordinator load in progress: retrying`).
BENIGN_RETRY = "Coordinator load in progress"
# The loggers of the Python Kafka clients inside Faust.
PYTHON_CLIENT_LOGGERS = ("aiokafka", "faust.transport")


class Windows:
    """One line per kind in each window: `admit` says whether a line is shown, and how many of its
    kind were held back since the last one shown."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # kind -> (when its window opened, lines held back since)
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()  # clients call in from their own threads

    def admit(self, kind: tuple[str, str]) -> tuple[bool, int]:
        now = self.clock()
        with self._lock:
            opened, held = self._windows.get(kind, (None, 0))
            if opened is not None and now - opened < WINDOW_S:
                self._windows[kind] = (opened, held + 1)
                return False, held + 1
            self._windows[kind] = (now, 0)
            return True, held


class ClientLog:
    """What confluent-kafka's `logger` setting takes: it calls `log(level, "%s [%s] %s", fac, name, text)`."""

    def __init__(self, logger: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger or logging.getLogger(LOGGER_NAME)
        self.windows = Windows(clock)

    def log(self, level: int, fmt: str, *args: object) -> None:
        facility, client, text = (str(a) for a in args) if len(args) == 3 else ("", "", fmt % args)
        if level < logging.WARNING:  # notices and info lines: debugging material
            self.logger.debug("%s %s: %s", client, facility, text)
            return
        if BENIGN_RETRY in text:  # a starting coordinator: retried at once, nothing to act on
            self.logger.info("Kafka client %s: %s %s", client, facility, text)
            return
        shown, held = self.windows.admit((client, facility))
        if not shown:
            self.logger.debug("%s %s: %s", client, facility, text)
            return
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


class RepeatFilter(logging.Filter):
    """A logger filter: a WARNING or worse is shown once per window for each (logger, message
    template), with the count of those held back since; repeats are dropped."""

    def __init__(self, windows: Windows) -> None:
        super().__init__()
        self.windows = windows

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        shown, held = self.windows.admit((record.name, str(record.msg)))
        if shown and held:
            record.msg, record.args = f"{record.getMessage()} ({held} more like it in the last {WINDOW_S:.0f} s)", ()
        return shown


def quiet_python_clients(windows: Windows | None = None) -> RepeatFilter:
    """Give every logger of the Python Kafka clients (aiokafka, Faust's transport) one line per
    cause and window. A filter on a logger sees only that logger's own records, so each gets it."""
    # Their modules create their loggers on import; import them now so that each gets the filter.
    import aiokafka.consumer.fetcher  # noqa: F401
    import faust.transport.drivers.aiokafka  # noqa: F401

    repeat = RepeatFilter(windows or Windows())
    names = [name for name in logging.root.manager.loggerDict if name.startswith(PYTHON_CLIENT_LOGGERS)]
    for name in {*names, *PYTHON_CLIENT_LOGGERS}:
        logging.getLogger(name).addFilter(repeat)
    return repeat
