"""Copy-draft decoding (model/grammar/draft.py) gives step-by-step constrained greedy's output, token for
token, in fewer forward passes, on a model that copies (the memorised fixture)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import torch

from model.answers.prompt import build_prompt
from model.config import EngineSettings
from model.engine import Extractor
from model.grammar.draft import PromptIndex, propose
from model.grammar.mask import Constrainer
from model.grammar.token_bytes import TokenBytes
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from ops.corpus import generate_corpus
from schemas.messages import Document
from tests.conftest import memorised_documents

DOCUMENTS = 208


@pytest.fixture(scope="module")
def memorised(memorised_model_dir: Path):
    settings = EngineSettings(path=str(memorised_model_dir), max_new_tokens=160, prompts_per_forward=64)
    return load_model(settings), settings


def documents() -> list[Document]:
    generated = memorised_documents() + list(generate_corpus(DOCUMENTS - 8, seed=31, brief=True))
    return [Document(doc_id=g.doc_id, text=g.text, task="extract", labels=tuple(g.values())) for g in generated]


def test_drafts_change_no_output_and_save_forward_passes(memorised) -> None:
    loaded, settings = memorised
    docs = documents()
    assert len(docs) >= 200
    outputs, passes = {}, {}
    for draft in (False, True):
        engine = Extractor(FastRunner(loaded, msgspec.structs.replace(settings, copy_draft="on" if draft else "off")))
        extractions, passes[draft] = [], 0
        for start in range(0, len(docs), 16):
            result = engine.extract(docs[start : start + 16])
            extractions += result.extractions
            passes[draft] += result.passes.forward
        outputs[draft] = [[t.generation.token_ids for t in e.traces] for e in extractions]
        outputs[draft, "fields"] = [e.fields for e in extractions]
        if draft:
            assert any(any(t.generation.drafted) for e in extractions for t in e.traces)
    assert outputs[True] == outputs[False]
    assert [{k: [(s.text, s.start) for s in v] for k, v in f.items()} for f in outputs[True, "fields"]] == [
        {k: [(s.text, s.start) for s in v] for k, v in f.items()} for f in outputs[False, "fields"]
    ]
    assert passes[True] < passes[False]


def test_a_draft_continues_the_prompt_after_the_answers_last_tokens() -> None:
    prompt = PromptIndex([5, 6, 7, 8, 9, 10, 11, 7, 8, 12])
    assert propose(None, [prompt], [[42, 6, 7, 8]], [3]) == [[9, 10, 11]]
    assert propose(None, [prompt], [[42, 7, 8]], [3]) == [[12]]  # the last occurrence, cut by the prompt's end
    assert propose(None, [prompt], [[42, 12]], [3]) == [[]]
    assert propose(None, [prompt], [[42]], [3]) == [[]]
    assert propose(None, [prompt, prompt], [[42, 6, 7, 8], [42, 6]], [0, 2]) == [[], [7, 8]]


@pytest.fixture(scope="module")
def demo_tokenizer():
    from transformers import AutoTokenizer

    from ops.train.demo_model import DEMO_DIR

    return AutoTokenizer.from_pretrained(DEMO_DIR)


def draft_after(tokenizer, text: str, labels: tuple[str, ...], answer: str, limit: int = 32) -> str:
    """What the proposer drafts after `answer`, given the document's prompt."""
    vocab = TokenBytes.from_tokenizer(tokenizer)
    constrainer = Constrainer(vocab, tokenizer.eos_token_id, torch.device("cpu"))
    [row] = constrainer.rows(text, [labels])
    generated = tokenizer(answer, add_special_tokens=False)["input_ids"]
    grammar = constrainer.batch([row], [generated])
    prompt = PromptIndex(tokenizer(build_prompt(text, "extract", labels), add_special_tokens=False)["input_ids"])
    return tokenizer.decode(propose(grammar, [prompt], [generated], [limit])[0])


def test_a_byte_fallback_twin_is_not_the_spelling_drafts_use(demo_tokenizer) -> None:
    # The demo tokenizer has `:` and its byte-fallback twin `<0x3A>`; the model writes the first.
    vocab = TokenBytes.from_tokenizer(demo_tokenizer)
    assert len(vocab.ids[b":"]) == 2
    assert vocab.ids[b":"][0] == demo_tokenizer.convert_tokens_to_ids(":")


def test_drafts_spell_the_next_label_and_copy_a_value_through_its_line_end(demo_tokenizer) -> None:
    text, labels = "甲方：华成公司\n乙方：李建\n", ("甲方", "乙方")
    assert draft_after(demo_tokenizer, text, labels, "") == "甲方: "
    # The value continues as the source does, through its newline, and the next label follows.
    assert draft_after(demo_tokenizer, text, labels, "甲方: 华") == "成公司\n乙方: "
    # `None` is forced once begun (no N in the text), then the next line's label.
    assert draft_after(demo_tokenizer, text, labels, "甲方: N") == "one\n乙方: "
    # Where a value starts the model chooses: nothing is drafted.
    assert draft_after(demo_tokenizer, text, labels, "甲方: 华成公司\n乙方: ") == ""
    assert draft_after(demo_tokenizer, text, labels, "甲方: ", limit=2) == ""
    assert draft_after(demo_tokenizer, text, labels, "", limit=2) == "甲方"
