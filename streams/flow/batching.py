"""Running a batch through the engine so that one bad document costs only itself."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")
Out = TypeVar("Out")
Result = TypeVar("Result")

log = logging.getLogger(__name__)


@dataclass
class Failed(Generic[Item]):
    item: Item
    error: BaseException


class DeadlineExceeded(TimeoutError):
    """An engine call ran past the batch deadline and was abandoned; the batch is bisected as if it raised."""


class Deadline:
    """Engine calls one at a time, each abandoned `seconds` after it got the engine (0: no deadline).

    A thread cannot be stopped, so an abandoned call keeps running, and keeps the engine: its caches
    are shared state, so the next call waits for it and only then starts its own clock. A call that
    was merely slow frees the engine when it returns and the bisection goes on; one that never
    returns stalls the calls after it (logged), as a hung device would stall any in-process worker.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._engine = threading.Lock()

    def call(self, run: Callable[[Sequence[Item]], Result], items: Sequence[Item]) -> Result:
        if self.seconds <= 0:
            return run(items)
        holding = threading.Event()
        outcome: list[Result] = []
        errors: list[BaseException] = []

        def target() -> None:
            with self._engine:
                holding.set()
                try:
                    outcome.append(run(items))
                except BaseException as exc:  # handed to the caller's thread below
                    errors.append(exc)

        thread = threading.Thread(target=target, name="engine-call", daemon=True)
        thread.start()
        while not holding.wait(self.seconds):
            log.error("the engine is still busy with a call abandoned at its deadline; %d documents wait", len(items))
        thread.join(self.seconds)
        if thread.is_alive():
            raise DeadlineExceeded(f"the engine did not finish {len(items)} document(s) within {self.seconds:g} s")
        if errors:
            raise errors[0]
        return outcome[0]


def run_isolated(run: Callable[[Sequence[Item]], list[Out]], items: Sequence[Item]) -> list[Out | Failed[Item]]:
    """`run(items)`, and if it raises, bisect until the documents that raise on their own are found.

    The rest of the batch still gets its results; only a culprit becomes `Failed`. Deterministic:
    the same batch always splits the same way.
    """
    if not items:
        return []
    try:
        results = run(items)
        if len(results) != len(items):
            raise RuntimeError(f"engine returned {len(results)} results for {len(items)} documents")
    except Exception as exc:
        if len(items) == 1:
            return [Failed(items[0], exc)]
        log.warning("batch of %d raised %s; bisecting to find the culprit", len(items), type(exc).__name__)
        middle = len(items) // 2
        return run_isolated(run, items[:middle]) + run_isolated(run, items[middle:])
    return list(results)
