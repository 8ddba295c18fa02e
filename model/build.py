"""The configured engine: loaded model, fast or reference runner, one replica per device."""

from __future__ import annotations

import gc

import msgspec

from model.answers.backoff import Backoff
from model.answers.words import load_segmenters
from model.config import EngineSettings
from model.engine import Engine, Extractor, prepare
from model.grammar import host_step
from model.prepare_pool import PreparePool
from model.replicas import ReplicaPool, visible_devices
from model.runner.attention import make_attention, pick_backend
from model.runner.bloom import Bloom
from model.runner.fast import FastRunner, prefill_call_tokens
from model.runner.loading import LoadedModel, load_model
from model.runner.protocol import Runner
from model.runner.reference import ReferenceRunner
from model.runner.score import BloomScorer
from model.values.entities import finder
from model.windows.engine import WindowedEngine
from model.windows.split import WindowSettings


def build_engine(settings: EngineSettings, windows: WindowSettings | None = None) -> Engine:
    """The configured engine, one replica per device when several are visible or listed, reading
    documents longer than the model's window in windows (model/windows/engine.py)."""
    per_device = [msgspec.structs.replace(settings, device=d) for d in visible_devices(settings.device)]
    loaded = [load_model(s) for s in per_device]
    runners = [_runner(m, s) for m, s in zip(loaded, per_device, strict=True)]
    prepare_with = prepare
    if settings.prepare_processes > 0:
        # One pool for every replica: preparing needs no device, and the tokenizer is the same.
        prepare_with = PreparePool(settings, runners[0].tokenizer, settings.prepare_processes).prepare
    engines = [Extractor(runner, prepare_with) for runner in runners]
    engine = engines[0] if len(engines) == 1 else ReplicaPool(engines)
    tokenizer = engines[0].runner.tokenizer
    backoff = lexicon_backoff(loaded[0], settings) if settings.backoff else None
    built = WindowedEngine(engine, tokenizer, settings, windows or WindowSettings(), backoff)
    load_segmenters()  # jieba's dictionaries now, not in the first batch
    host_step.load()  # and the grammar's compiled step
    return built


def settle_heap() -> None:
    """Take everything loaded so far (weights' modules, tokenizers, jieba's dictionaries: some 400,000
    objects once an engine is built) out of the garbage collector's full passes, for the life of the
    process (`gc.freeze`). A full pass walks every tracked object, a stall in whichever batch
    triggered it (ops/BENCHMARKS.md: the engine benchmark's host time per step halved). For a
    long-lived process (the worker, a benchmark) after its engine is built: what it froze is never
    collected as cyclic garbage."""
    gc.collect()
    gc.freeze()


def build_runner(settings: EngineSettings) -> Runner:
    """The configured runner on one device (settings.device names one)."""
    return _runner(load_model(settings), settings)


def lexicon_backoff(loaded: LoadedModel, settings: EngineSettings) -> Backoff:
    """The backoff scoring with our module over the loaded model's weights (shared, not copied)."""
    backend = pick_backend(loaded.device, settings.attention)
    module = Bloom.from_transformers(loaded.model)
    call_tokens = prefill_call_tokens(loaded.device)
    score = BloomScorer(module, make_attention(backend), heads_first=backend != "flash", call_tokens=call_tokens)
    return Backoff(finder(settings.user_dictionary), score, loaded.tokenizer, settings.max_input_tokens)


def _runner(loaded: LoadedModel, settings: EngineSettings) -> Runner:
    if settings.engine == "reference":
        return ReferenceRunner(loaded, settings)
    return FastRunner(loaded, settings)
