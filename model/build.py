"""The configured engine: loaded model, fast or reference runner, one replica per device."""

from __future__ import annotations

import msgspec

from model.config import EngineSettings
from model.engine import Engine
from model.runner.fast import FastEngine
from model.runner.loading import load_model
from model.runner.reference import ReferenceEngine
from model.runner.replicas import ReplicaPool, visible_devices


def build_engine(settings: EngineSettings) -> Engine:
    """The configured engine, one replica per device when several are visible or listed."""
    devices = visible_devices(settings.device)
    engines = [_single_engine(msgspec.structs.replace(settings, device=d)) for d in devices]
    return engines[0] if len(engines) == 1 else ReplicaPool(engines)


def _single_engine(settings: EngineSettings) -> Engine:
    loaded = load_model(settings)
    if settings.engine == "reference":
        return ReferenceEngine(loaded, settings)
    return FastEngine(loaded, settings)
