"""Shared fixtures: tiny BLOOM checkpoints built by the tests (random, and memorised), and a real Kafka broker."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec
import pytest
import torch

from model.build import build_engine
from model.config import EngineSettings
from model.engine import Engine
from ops.corpus import GeneratedDocument, generate_corpus
from ops.demo.samples import sample_documents
from ops.train.recipe import Recipe, train_bloom
from ops.train.tiny import build_tiny_bloom
from schemas.decode import decode_document

pytest_plugins = ["tests.kafka_fixture", "tests.postgres_fixture"]

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


# The memorised fixture: a BLOOM trained on the spot (ops/train/recipe.py) to know these documents by
# heart, while reading 800 other documents once each (two a step). Those give it a broad prior over
# values: on text it cannot place (unseen documents, garbage) its value steps spread over many
# names and dates and raise entropy alarms, where a model that read only 8 documents has at most a
# couple of candidates per label and is confidently wrong. Measured on a loaded 2-core machine
# (1 thread): 69 s; memorised values at confidence >= 0.96; garbage steps up to 4.5-5 nats.
MEMORISED_SEED = 2024
MEMORISED_DOCUMENTS = 8
BACKGROUND_SEED = 2025
MEMORISED_RECIPE = Recipe(
    steps=400, lr=8e-3, batch_size=8, hidden_size=64, n_layer=2, n_head=4, seed=0, background_per_step=2
)


def memorised_documents() -> list[GeneratedDocument]:
    return list(generate_corpus(MEMORISED_DOCUMENTS, seed=MEMORISED_SEED, brief=True))


@pytest.fixture(scope="session")
def memorised_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def labelled(docs: Iterable[GeneratedDocument]) -> list:
        return [(decode_document(msgspec.json.encode(d.raw()), 1 << 20), d.values()) for d in docs]

    count = MEMORISED_RECIPE.steps * MEMORISED_RECIPE.background_per_step
    background = labelled(generate_corpus(count, seed=BACKGROUND_SEED, brief=True))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; one thread also keeps the run bit-reproducible
    try:
        directory = tmp_path_factory.mktemp("memorised-bloom")
        return train_bloom(directory, labelled(memorised_documents()), MEMORISED_RECIPE, background=background)
    finally:
        torch.set_num_threads(threads)
