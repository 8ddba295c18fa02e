"""The extraction engine: model loading, prompting, greedy decoding and checking its output.

This module is model/'s public face: streams/ imports these names from `model` and nothing from
inside it (an import-linter contract in pyproject.toml holds that). Each name is imported on first
use, so reading the settings does not load torch.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# A document's output must not depend on its batch mates. On Intel CPUs MKL's GEMM rounds a row
# differently by the matrix's row count and alignment (15 of 39 row counts differed, measured);
# strict conditional numerical reproducibility fixes the summation order. MKL reads this at its
# first call, so setting it here, before any model runs, is enough; a user's own value wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

if TYPE_CHECKING:
    from model.answers.validate import Extraction
    from model.build import build_engine, build_runner, settle_heap
    from model.clock import ms_since, sum_timings
    from model.config import DEFAULT_MODEL, EngineSettings
    from model.engine import BatchResult, Engine, Extractor, PreparingEngine
    from model.runner.loading import ModelNotFoundError, resolve_model_path
    from model.runner.protocol import Generated, Passes, Request, Runner
    from model.windows.split import WindowSettings

_HOMES = {
    "Extraction": "model.answers.validate",
    "build_engine": "model.build",
    "build_runner": "model.build",
    "settle_heap": "model.build",
    "ms_since": "model.clock",
    "sum_timings": "model.clock",
    "DEFAULT_MODEL": "model.config",
    "EngineSettings": "model.config",
    "BatchResult": "model.engine",
    "Engine": "model.engine",
    "Extractor": "model.engine",
    "PreparingEngine": "model.engine",
    "ModelNotFoundError": "model.runner.loading",
    "resolve_model_path": "model.runner.loading",
    "Generated": "model.runner.protocol",
    "Passes": "model.runner.protocol",
    "Request": "model.runner.protocol",
    "Runner": "model.runner.protocol",
    "WindowSettings": "model.windows.split",
}
__all__ = [
    "DEFAULT_MODEL",
    "BatchResult",
    "Engine",
    "EngineSettings",
    "Extraction",
    "Extractor",
    "Generated",
    "ModelNotFoundError",
    "Passes",
    "PreparingEngine",
    "Request",
    "Runner",
    "WindowSettings",
    "build_engine",
    "build_runner",
    "ms_since",
    "resolve_model_path",
    "settle_heap",
    "sum_timings",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'model' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
