"""Shared fixtures: a tiny BLOOM checkpoint built by the tests, and a real Kafka broker."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from model.config import EngineSettings
from model.engine import Engine, build_engine
from model.tiny import build_tiny_bloom
from ops.samples import sample_documents

pytest_plugins = ["tests.kafka_fixture"]

# Short generations keep the random-weight model's runs (it never stops by itself) fast.
TEST_MAX_NEW_TOKENS = 24


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [raw["text"] for raw, _ in sample_documents(100, seed=1)]
    return build_tiny_bloom(tmp_path_factory.mktemp("tiny-bloom"), texts, seed=0)


@pytest.fixture(scope="session")
def engine_settings(tiny_model_dir: Path) -> EngineSettings:
    return EngineSettings(path=str(tiny_model_dir), max_new_tokens=TEST_MAX_NEW_TOKENS)


@pytest.fixture(scope="session")
def reference_engine(engine_settings: EngineSettings) -> Engine:
    return build_engine(msgspec.structs.replace(engine_settings, engine="reference"))
