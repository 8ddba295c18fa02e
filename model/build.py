"""The configured engine: loaded model, fast or reference runner, one replica per device."""

from __future__ import annotations

import msgspec

from model.config import EngineSettings
from model.engine import Engine, Extractor
from model.replicas import ReplicaPool, visible_devices
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from model.runner.protocol import Runner
from model.runner.reference import ReferenceRunner
from model.windows.engine import WindowedEngine
from model.windows.split import WindowSettings


def build_engine(settings: EngineSettings, windows: WindowSettings | None = None) -> Engine:
    """The configured engine, one replica per device when several are visible or listed, reading
    documents longer than the model's window in windows (model/windows/engine.py)."""
    devices = visible_devices(settings.device)
    engines = [_single_engine(msgspec.structs.replace(settings, device=d)) for d in devices]
    engine = engines[0] if len(engines) == 1 else ReplicaPool(engines)
    return WindowedEngine(engine, engines[0].runner.tokenizer, settings, windows or WindowSettings())


def build_runner(settings: EngineSettings) -> Runner:
    """The configured runner on one device (settings.device names one)."""
    loaded = load_model(settings)
    if settings.engine == "reference":
        return ReferenceRunner(loaded, settings)
    return FastRunner(loaded, settings)


def _single_engine(settings: EngineSettings) -> Extractor:
    return Extractor(build_runner(settings))
