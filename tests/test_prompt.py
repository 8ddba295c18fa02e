"""SeqGPT's prompt as its reference code builds it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from tokenizers.processors import TemplateProcessing
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from model.answers.prompt import build_prompt, chunk_labels, encode_chunk_prompts, token_ids
from ops.demo.samples import sample_documents

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("count", "sizes"), [(6, [6]), (7, [4, 3]), (8, [4, 4]), (13, [5, 4, 4]), (1, [1]), (12, [6, 6]), (0, [])]
)
def test_labels_are_split_into_near_equal_chunks(count: int, sizes: list[int]) -> None:
    labels = [f"l{i}" for i in range(count)]
    chunks = chunk_labels(labels, 6)
    assert [len(c) for c in chunks] == sizes
    assert [label for chunk in chunks for label in chunk] == labels


def test_chunks_are_those_of_the_reference_array_split() -> None:
    for count in range(1, 65):
        for size in range(1, 9):
            labels = [f"l{i}" for i in range(count)]
            reference = [tuple(str(x) for x in part) for part in np.array_split(labels, math.ceil(count / size))]
            assert chunk_labels(labels, size) == reference


def prompt_texts() -> list[str]:
    """Texts the text-once tokenising must handle: generated, hand-written, and edges of the text's line."""
    texts = [raw["text"] for raw, _ in sample_documents(80, seed=7)]
    for corpus in sorted((ROOT / "ops" / "corpus").glob("*.jsonl")):
        if corpus.name.endswith(".truth.jsonl"):
            continue
        texts += [json.loads(line)["text"] for line in corpus.read_text().splitlines()[:40] if line.strip()]
    return [*texts, "", "a", "结尾。", "句号。\n", "空格 ", "换行\n", "\n\n", "Tab\t", "emoji 😀", "抽取: 甲方"]


def whole(tokenizer: PreTrainedTokenizerBase, text: str, chunks: list[tuple[str, ...]]) -> list[list[int]]:
    return [tokenizer(build_prompt(text, "extract", c))["input_ids"] for c in chunks]


CHUNKS = [("甲方", "乙方", "金额"), ("签订日期", "地点"), ("公司",)]


@pytest.mark.parametrize("which", ["demo", "tiny"])
def test_text_tokenised_once_gives_every_prompt_as_tokenised_whole(which: str, tiny_model_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "model" / "demo" if which == "demo" else tiny_model_dir)
    for text in prompt_texts():
        for chunks in (CHUNKS, CHUNKS[:1]):
            assert encode_chunk_prompts(tokenizer, text, "extract", chunks) == whole(tokenizer, text, chunks), text


def test_a_tokenizer_that_adds_tokens_around_a_text_is_tokenised_whole() -> None:
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "model" / "demo")
    bos, eos = tokenizer.bos_token, tokenizer.eos_token
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}", special_tokens=[(bos, tokenizer.bos_token_id), (eos, tokenizer.eos_token_id)]
    )
    text = next(iter(sample_documents(1, seed=7)))[0]["text"]
    prompts = encode_chunk_prompts(tokenizer, text, "extract", CHUNKS)
    assert prompts[1][0] == tokenizer.bos_token_id and prompts[1][-1] == tokenizer.eos_token_id
    assert prompts == whole(tokenizer, text, CHUNKS)


@pytest.mark.parametrize("which", ["demo", "tiny"])
def test_prompt_ids_from_the_rust_tokenizer_are_the_tokenizers_own(
    which: str, tiny_model_dir, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "model" / "demo" if which == "demo" else tiny_model_dir)
    texts = [build_prompt(text, "extract", CHUNKS[0]) for text in prompt_texts()]
    called = tokenizer(texts)["input_ids"]
    # The shortcut is taken for the tokenizers the loader gives (else this compares the call with itself).
    with monkeypatch.context() as patched:
        patched.setattr(type(tokenizer), "__call__", lambda *_, **__: pytest.fail("the tokenizer was called"))
        assert token_ids(tokenizer, texts) == called
    # A tokenizer set to truncate is called as it was: the call tokenises whole unless asked.
    tokenizer.backend_tokenizer.enable_truncation(8)
    assert token_ids(tokenizer, texts) == tokenizer(texts)["input_ids"]
    assert max(len(ids) for ids in token_ids(tokenizer, texts)) > 8
