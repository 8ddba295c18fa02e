"""How a long-running command (a worker, a sink) learns that it should stop."""

from __future__ import annotations

import threading


def stop_on_signals() -> threading.Event:
    """Set by SIGTERM (docker stop, Kubernetes) and Ctrl-C: a loop finishes the batch in hand,
    commits, and closes (a static member keeps its place in the group for its return)."""
    import signal

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop
