"""Running a batch through the engine so that one bad document costs only itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")
Out = TypeVar("Out")

log = logging.getLogger(__name__)


@dataclass
class Failed(Generic[Item]):
    item: Item
    error: BaseException


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
