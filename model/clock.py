"""Stage timings: milliseconds since a reading, and the stages of several batches added up."""

from __future__ import annotations

import time
from collections.abc import Iterable

from schemas.messages import Timings


def ms_since(started: float) -> float:
    """Milliseconds since a `time.perf_counter()` reading."""
    return (time.perf_counter() - started) * 1000


def sum_timings(parts: Iterable[Timings]) -> Timings:
    """Stage by stage, the time several batches took one after another."""
    total = Timings()
    for part in parts:
        for name in Timings.__struct_fields__:
            setattr(total, name, getattr(total, name) + getattr(part, name))
    return total
