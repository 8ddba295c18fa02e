"""The reference engine on a real (tiny, random) BLOOM checkpoint loaded like SeqGPT's."""

from __future__ import annotations

import msgspec
import pytest
import torch

from model.answers.prompt import build_prompt, encode, encode_prompts, fit_text, prompt_chunks
from model.build import build_engine
from model.config import EngineSettings
from model.runner.loading import ModelNotFoundError
from model.runner.protocol import Request
from ops.demo.samples import sample_documents
from schemas.decode import decode_document
from schemas.messages import Document, ReviewCode


def documents(count: int, seed: int = 3) -> list[Document]:
    return [decode_document(msgspec.json.encode(raw), 1 << 20) for raw, _ in sample_documents(count, seed=seed)]


def test_prompt_is_seqgpts_byte_for_byte() -> None:
    assert build_prompt("文本", "extract", ["甲方", "乙方"]) == "输入: 文本\n抽取: 甲方，乙方\n输出: [GEN]"
    assert build_prompt("文本", "classify", ["体育"]) == "输入: 文本\n分类: 体育\n输出: [GEN]"


def test_generation_is_plain_greedy(reference_engine) -> None:
    """Each generated token is the argmax of a fresh full forward pass over the prompt so far."""
    model = reference_engine.inner.runner.loaded.model
    doc = documents(1)[0]
    [prompt, *_] = encode_prompts(reference_engine.tokenizer, doc, 6, 1024).prompts
    # No row constraint: generate() is transformers' own greedy, the oracle.
    [generation] = reference_engine.inner.runner.generate_batch([Request(prompt)]).generations
    ids = list(prompt)
    with torch.inference_mode():
        for expected in generation.token_ids:
            logits = model(torch.tensor([ids])).logits[0, -1]
            assert int(logits.argmax()) == expected
            ids.append(expected)


def test_same_input_same_output(reference_engine) -> None:
    docs = documents(6)
    first = reference_engine.extract(docs).extractions
    second = reference_engine.extract(docs).extractions
    assert [msgspec.json.encode(e.__dict__) for e in first] == [msgspec.json.encode(e.__dict__) for e in second]


def test_every_document_gets_one_extraction_with_signals(reference_engine) -> None:
    docs = documents(7)
    result = reference_engine.extract(docs)
    assert [e.doc_id for e in result.extractions] == [d.doc_id for d in docs]
    assert result.timings.decode_ms > 0 and result.timings.tokenize_ms > 0
    for extraction, doc in zip(result.extractions, docs, strict=True):
        # A random-weight model is unsure of everything: each document is alarmed and sent to review.
        assert extraction.needs_review and extraction.alarms
        for spans in extraction.fields.values():
            for span in spans:
                assert doc.text[span.start : span.end] == span.text


def test_long_document_is_cut_at_its_tail_inside_and_read_in_windows_by_the_built_engine(engine_settings) -> None:
    engine = build_engine(msgspec.structs.replace(engine_settings, max_input_tokens=64))
    doc = documents(1)[0]
    long_doc = msgspec.structs.replace(doc, text=doc.text * 20)
    chunks = prompt_chunks(long_doc, 6)
    text, truncated = fit_text(engine.tokenizer, long_doc, chunks, 64)
    assert truncated and long_doc.text.startswith(text) and len(text) < len(long_doc.text)
    assert max(len(encode(engine.tokenizer, build_prompt(text, "extract", c))) for c in chunks) <= 64
    [cut] = engine.inner.extract([long_doc]).extractions  # the engine alone reads the head only
    assert ReviewCode.TRUNCATED in {r.code for r in cut.reasons}
    [whole] = engine.extract([long_doc]).extractions
    assert ReviewCode.TRUNCATED not in {r.code for r in whole.reasons} and len(whole.windows) > 1


def test_missing_model_says_how_to_point_at_a_local_copy(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError, match="SEQSTREAM_MODEL__PATH"):
        build_engine(EngineSettings(path=str(tmp_path / "no-such-model")))
