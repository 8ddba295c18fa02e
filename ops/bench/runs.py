"""What one benchmark run was asked to do and what it measured: shared by the runner and the plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunConfig:
    name: str
    max_documents: int
    window_ms: float
    rate_per_s: float | None  # None: the whole corpus at once

    @property
    def arrival(self) -> str:
        return "burst" if self.rate_per_s is None else f"{self.rate_per_s:.2f} docs/s"


@dataclass
class RunResult:
    config: RunConfig
    documents: int
    latencies_s: list[float]
    throughput_per_s: float
    wall_s: float
    mean_batch: float
    stage_ms: dict[str, float]  # per document, mean
    engine: str = ""  # as the records name it: model.engine, model.attention, model.device
    worker_stage_ms: dict[str, float] = field(default_factory=dict)  # per batch, mean, from /metrics

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_s, q)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): an observed value, no interpolation."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered) / 100)))
    return ordered[rank - 1]
