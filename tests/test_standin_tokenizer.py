"""The stand-in for BLOOM's tokenizer (ops/train/standin_tokenizer.py): BLOOM's size, long Chinese tokens that
encoding really produces, lossless, deterministic, and readable by the constraint code and the loader."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from model.config import EngineSettings
from model.grammar.token_bytes import TokenBytes
from model.runner.loading import load_model
from ops.demo.samples import sample_documents
from ops.train.standin_tokenizer import STANDIN_SIZE, build_standin_tokenizer, save_standin_model

# Small enough to build twice in a few seconds, large enough to reach the seeded pairs and triples.
SMALL_SIZE = 30_000


def _merges(tokenizer: PreTrainedTokenizerBase) -> list:
    return json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]


def _is_chinese(text: str) -> bool:
    return bool(text) and all("\u4e00" <= char <= "\u9fff" for char in text)


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return [raw["text"] for raw, _ in sample_documents(20, seed=1)]


@pytest.fixture(scope="module")
def unseen() -> list[str]:
    # Another seed: documents the tokenizer was not built from.
    return [raw["text"] for raw, _ in sample_documents(5, seed=7)]


@pytest.fixture(scope="module")
def tokenizer(corpus: list[str]) -> PreTrainedTokenizerFast:
    return build_standin_tokenizer(corpus)


def test_has_bloom_size_and_special_ids(tokenizer: PreTrainedTokenizerFast) -> None:
    assert abs(len(tokenizer) - STANDIN_SIZE) <= STANDIN_SIZE // 100
    specials = (tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)
    assert specials == (0, 1, 2, 3)


def test_encodes_unseen_documents_with_long_tokens_losslessly(
    tokenizer: PreTrainedTokenizerFast, unseen: list[str]
) -> None:
    for text in unseen:
        ids = tokenizer(text)["input_ids"]
        assert tokenizer.decode(ids) == text
        assert any(len(tokenizer.decode([i])) >= 2 and _is_chinese(tokenizer.decode([i])) for i in ids)


def test_added_tokens_are_reachable_by_merges(tokenizer: PreTrainedTokenizerFast) -> None:
    # A sample of the multi-character entries, the seeded fillers among them: each must come out of the
    # tokenizer as itself, or the vocabulary would be big only on paper.
    vocab = tokenizer.get_vocab()
    words = {tokenizer.decode([i]): i for i in range(len(tokenizer) - 50_000, len(tokenizer))}
    long_words = sorted(word for word in words if len(word) >= 2 and _is_chinese(word))
    assert len(long_words) > 40_000
    sample = random.Random(0).sample(long_words, 2_000)
    encoded = tokenizer.backend_tokenizer.encode_batch(sample, add_special_tokens=False)
    assert [e.ids for e in encoded] == [[words[word]] for word in sample]
    assert len(vocab) == len(tokenizer)


def test_token_bytes_of_long_tokens_are_their_utf8(tokenizer: PreTrainedTokenizerFast, unseen: list[str]) -> None:
    token_bytes = TokenBytes.from_tokenizer(tokenizer)
    assert len(token_bytes.by_id) == len(tokenizer)
    assert token_bytes.by_id[:4] == [None] * 4
    ids = tokenizer(unseen[0])["input_ids"]
    long_ids = [i for i in ids if len(tokenizer.decode([i])) >= 2 and _is_chinese(tokenizer.decode([i]))]
    assert long_ids
    for token_id in long_ids:
        assert token_bytes.by_id[token_id] == tokenizer.decode([token_id]).encode("utf-8")
    assert b"".join(token_bytes.by_id[i] or b"" for i in ids) == unseen[0].encode("utf-8")


def test_saved_model_loads_and_same_seed_builds_same_vocabulary(tmp_path: Path, corpus: list[str]) -> None:
    directory = save_standin_model(tmp_path / "standin", corpus, size=SMALL_SIZE, seed=0)
    loaded = load_model(EngineSettings(path=str(directory), device="cpu"))
    assert loaded.demo  # the manifest marks it as a checkpoint SeqStream built
    assert len(loaded.tokenizer) == SMALL_SIZE
    assert loaded.model.config.vocab_size == SMALL_SIZE
    again = build_standin_tokenizer(corpus, size=SMALL_SIZE, seed=0)
    assert again.get_vocab() == loaded.tokenizer.get_vocab()
    assert _merges(again) == _merges(loaded.tokenizer)
