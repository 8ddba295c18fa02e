"""Real model behaviour on every route, from a BLOOM trained here to memorise a few documents
(`memorised_model_dir`): nothing about the thresholds is changed to make a route happen."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from model.build import build_engine
from model.config import EngineSettings
from model.engine import Engine
from ops.corpus import generate_corpus, write_corpus
from ops.eval.accuracy import evaluate_file, normalise
from ops.train.recipe import answer_texts
from schemas.decode import decode_document
from schemas.messages import ReviewCode
from tests.conftest import memorised_documents

MAX_NEW_TOKENS = 160


@pytest.fixture(scope="module")
def engine(memorised_model_dir: Path) -> Engine:
    return build_engine(EngineSettings(path=str(memorised_model_dir), engine="fast", max_new_tokens=MAX_NEW_TOKENS))


@pytest.fixture(scope="module")
def free_engine(memorised_model_dir: Path) -> Engine:
    """Decoding without the answer grammar: the model's own inventions reach validation (and only
    them: no lexicon backoff, whose candidates would find values the model does not know)."""
    settings = EngineSettings(path=str(memorised_model_dir), max_new_tokens=MAX_NEW_TOKENS, constrained=False)
    return build_engine(msgspec.structs.replace(settings, backoff=False))


def as_document(raw: dict):
    return decode_document(msgspec.json.encode(raw), 1 << 20)


def test_the_answers_fit_in_the_generation_limit(memorised_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(memorised_model_dir)
    for generated in memorised_documents():
        for answer in answer_texts(as_document(generated.raw()), generated.values(), 6):
            assert len(tokenizer(answer)["input_ids"]) < MAX_NEW_TOKENS


def test_memorised_documents_come_out_validated_with_their_values(engine: Engine) -> None:
    generated = memorised_documents()
    settings = EngineSettings()
    result = engine.extract([as_document(g.raw()) for g in generated])
    for g, extraction in zip(generated, result.extractions, strict=True):
        assert extraction.reasons == [], (g.doc_id, extraction.reasons)
        assert {label: [s.text for s in spans] for label, spans in extraction.fields.items()} == g.values()
        for spans in extraction.fields.values():
            for span in spans:
                assert g.text[span.start : span.end] == span.text
                assert span.confidence > settings.confidence_threshold
        assert extraction.alarms == []


@pytest.mark.parametrize("constrained", [True, False], ids=["constrained", "free"])
def test_an_unseen_document_goes_to_review_and_its_invented_values_are_rejected(
    engine: Engine, free_engine: Engine, constrained: bool
) -> None:
    unseen = list(generate_corpus(5, seed=99, brief=True))
    result = (engine if constrained else free_engine).extract([as_document(g.raw()) for g in unseen])
    for g, extraction in zip(unseen, result.extractions, strict=True):
        assert extraction.needs_review, g.doc_id
        # Whatever it wrote, nothing outside the document became a field.
        assert all(g.text[s.start : s.end] == s.text for spans in extraction.fields.values() for s in spans)
    codes = {r.code for e in result.extractions for r in e.reasons}
    # Free, it invents values and validation rejects them; constrained, it cannot write them.
    assert (ReviewCode.NOT_IN_SOURCE in codes) != constrained


def test_accuracy_harness_scores_memorised_and_unseen_corpora(
    engine: Engine, free_engine: Engine, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.jsonl"
    write_corpus(seen, iter(memorised_documents()))
    report = evaluate_file(engine, seen, batch_size=4)
    table = report.as_dict()
    assert table["micro"]["f1"] == 1.0 and table["micro"]["exact_match"] == 1.0
    assert table["fields_share"] == 1.0 and table["not_in_source_values"] == 0

    unseen = tmp_path / "unseen.jsonl"
    write_corpus(unseen, generate_corpus(5, seed=99, brief=True))
    report = evaluate_file(free_engine, unseen, batch_size=4).as_dict()
    assert report["review_share"] == 1.0
    assert report["micro"]["recall"] < 0.5
    assert report["not_in_source_values"] > 0
    assert evaluate_file(engine, unseen, batch_size=4).as_dict()["not_in_source_values"] == 0
    json.dumps(report)  # the table is plain JSON


def test_normalise_folds_widths_and_spaces() -> None:
    assert normalise("１３８ ００１３") == normalise("1380013")


def test_typed_values_compare_by_their_normal_form() -> None:
    assert normalise("2024年3月5日", "date") == normalise("2024-03-05", "date")
    assert normalise("人民币伍拾万元", "amount") == normalise("¥500,000.00", "amount")
    assert normalise("5000元", "amount") != normalise("USD 5000", "amount")
    # A typed value with no normal form falls back to the plain comparison instead of matching nothing.
    assert normalise("不详", "date") == normalise("不 详")


def test_garbage_text_raises_entropy_alarms(engine: Engine) -> None:
    # Garbage of three sorts: rare CJK characters, Latin noise, one repeated symbol. The model's
    # own uncertainty flags it (the default 2.5-nat threshold), not only the answer checks.
    garbage = ["罏菕匮漤轱谲臔瓒謁篔" * 10, "hcbmlh4ndb qx 93k" * 8, "#" * 50]
    docs = [as_document({"doc_id": f"g{i}", "text": t, "field_set": "contract"}) for i, t in enumerate(garbage)]
    settings = EngineSettings()
    for doc, extraction in zip(docs, engine.extract(docs).extractions, strict=True):
        assert extraction.needs_review, doc.doc_id
        assert extraction.alarms, doc.doc_id
        assert ReviewCode.ENTROPY_ALARM in {r.code for r in extraction.reasons}
        assert all(a.entropy_nats > settings.entropy_threshold for a in extraction.alarms)
        # Whatever it wrote, nothing outside the text became a field.
        assert all(doc.text[s.start : s.end] == s.text for spans in extraction.fields.values() for s in spans)
