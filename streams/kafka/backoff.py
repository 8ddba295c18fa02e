"""The growing pause between tries of something that fails for a while (a broker away, replicas short,
a database restarting), shared by every loop that retries: the Faust agent's writes, the exactly-once
worker's transactions and the PostgreSQL sink's polls."""

from __future__ import annotations


class Backoff:
    """Pauses between tries of one failing call: `first_s`, doubling, at most `max_s`; `reset()` after a success."""

    def __init__(self, first_s: float = 0.5, max_s: float = 30.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next = first_s

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next = self.first_s
