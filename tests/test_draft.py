"""Copy-draft decoding (model/draft.py) gives step-by-step constrained greedy's output, token for
token, in fewer forward passes, on a model that copies (the memorised fixture)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from model.config import EngineSettings
from model.draft import PromptIndex, propose
from model.fast import FastEngine
from model.loading import load_model
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
        engine = FastEngine(loaded, msgspec.structs.replace(settings, copy_draft="on" if draft else "off"))
        extractions = []
        for start in range(0, len(docs), 16):
            extractions += engine.extract(docs[start : start + 16]).extractions
        outputs[draft] = [[t.generation.token_ids for t in e.traces] for e in extractions]
        outputs[draft, "fields"] = [e.fields for e in extractions]
        passes[draft] = engine.forward_passes
        if draft:
            assert any(any(t.generation.drafted) for e in extractions for t in e.traces)
    assert outputs[True] == outputs[False]
    assert [{k: [(s.text, s.start) for s in v] for k, v in f.items()} for f in outputs[True, "fields"]] == [
        {k: [(s.text, s.start) for s in v] for k, v in f.items()} for f in outputs[False, "fields"]
    ]
    assert passes[True] < passes[False]


def test_a_draft_continues_the_prompt_after_the_answers_last_tokens() -> None:
    prompt = PromptIndex([5, 6, 7, 8, 9, 10, 11, 7, 8, 12])
    assert propose(None, prompt, [42, 6, 7, 8], 3) == [9, 10, 11]
    assert propose(None, prompt, [42, 7, 8], 3) == [12]  # the last occurrence, cut by the prompt's end
    assert propose(None, prompt, [42, 12], 3) == []
    assert propose(None, prompt, [42], 3) == []
