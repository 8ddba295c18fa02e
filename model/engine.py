"""What the pipeline asks of an extraction engine, whichever runs inside it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from model.config import EngineSettings
from model.validate import Extraction
from schemas.messages import DecodeSettings, Document, ModelInfo, Timings


@dataclass
class BatchResult:
    extractions: list[Extraction]
    timings: Timings = field(default_factory=Timings)
    generated_tokens: int = 0


class Engine(Protocol):
    info: ModelInfo

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        """One `Extraction` per document, in order. May raise; the caller isolates the culprit."""
        ...


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


def decode_settings(settings: EngineSettings) -> DecodeSettings:
    return DecodeSettings(
        max_new_tokens=settings.max_new_tokens,
        max_input_tokens=settings.max_input_tokens,
        labels_per_prompt=settings.labels_per_prompt,
        confidence_threshold=settings.confidence_threshold,
        entropy_threshold=settings.entropy_threshold,
    )


def build_engine(settings: EngineSettings) -> Engine:
    """The configured engine, one replica per device when several are visible or listed."""
    import msgspec

    from model.replicas import ReplicaPool, visible_devices

    devices = visible_devices(settings.device)
    engines = [_single_engine(msgspec.structs.replace(settings, device=d)) for d in devices]
    return engines[0] if len(engines) == 1 else ReplicaPool(engines)


def _single_engine(settings: EngineSettings) -> Engine:
    from model.loading import load_model

    loaded = load_model(settings)
    if settings.engine == "reference":
        from model.reference import ReferenceEngine

        return ReferenceEngine(loaded, settings)
    from model.fast import FastEngine

    return FastEngine(loaded, settings)
