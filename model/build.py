"""The configured engine: loaded model, fast or reference runner, one replica per device."""

from __future__ import annotations

import msgspec

from model.config import EngineSettings
from model.engine import Engine
from model.runner.fast import FastEngine
from model.runner.loading import load_model
from model.runner.reference import ReferenceEngine
from model.runner.replicas import ReplicaPool, visible_devices
from model.windows.engine import WindowedEngine
from model.windows.split import WindowSettings


def build_engine(settings: EngineSettings, windows: WindowSettings | None = None) -> Engine:
    """The configured engine, one replica per device when several are visible or listed, reading
    documents longer than the model's window in windows (model/windows/engine.py)."""
    devices = visible_devices(settings.device)
    engines = [_single_engine(msgspec.structs.replace(settings, device=d)) for d in devices]
    engine = engines[0] if len(engines) == 1 else ReplicaPool(engines)
    return WindowedEngine(engine, engines[0].tokenizer, settings, windows or WindowSettings())


def _single_engine(settings: EngineSettings) -> Engine:
    loaded = load_model(settings)
    if settings.engine == "reference":
        return ReferenceEngine(loaded, settings)
    return FastEngine(loaded, settings)
