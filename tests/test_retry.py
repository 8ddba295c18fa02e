"""The validation loop (model/answers/retry.py): failing values are re-decoded from their least certain step,
at most three times each, deterministically, and what still fails goes to review with its reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec
import pytest
from transformers import AutoTokenizer

from model.answers.checks import name_like
from model.answers.retry import RETRIES_PER_VALUE, first_failure, revisit, splice_value
from model.answers.validate import Detokenizer, Extraction, value_problem
from model.config import EngineSettings
from model.engine import Extractor, generate, prepare
from model.runner.fast import FastRunner
from model.runner.loading import DEMO_MODEL_DIR, load_model
from model.runner.protocol import Request
from model.runner.reference import ReferenceRunner
from model.signals import Generation
from model.values.field_types import FieldType, matches
from model.values.lexicon import surnames
from ops.corpus import generate_corpus
from ops.demo.samples import sample_documents
from ops.eval.accuracy import read_corpus
from schemas.decode import decode_document
from schemas.messages import Document, ReviewCode


@pytest.fixture(scope="module")
def memorised(memorised_model_dir: Path):
    settings = EngineSettings(path=str(memorised_model_dir), max_new_tokens=160)
    return load_model(settings), settings


def unseen_documents() -> list[Document]:
    return [
        Document(doc_id=g.doc_id, text=g.text, task="extract", labels=tuple(g.values()))
        for g in generate_corpus(4, seed=99, brief=True)
    ]


def typed(doc: Document, field_types: dict[str, FieldType], **changes) -> Document:
    return msgspec.structs.replace(doc, field_types=field_types, **changes)


def record(extraction: Extraction) -> bytes:
    return msgspec.json.encode(
        {"fields": extraction.fields, "reasons": extraction.reasons, "retries": extraction.retries}
    )


def retried_reasons(extraction: Extraction) -> list[str]:
    return [r.detail for r in extraction.reasons if "re-decodes" in r.detail]


def test_invented_values_are_re_decoded_and_the_rest_reviewed(memorised) -> None:
    loaded, settings = memorised
    engine = Extractor(FastRunner(loaded, msgspec.structs.replace(settings, constrained=False)))
    docs = unseen_documents()
    extractions = engine.extract(docs).extractions
    assert sum(e.retries for e in extractions) > 0
    for e, doc in zip(extractions, docs, strict=True):
        spans = [s for spans in e.fields.values() for s in spans]
        assert all(doc.text[s.start : s.end] == s.text and 0 <= s.retries <= RETRIES_PER_VALUE for s in spans)
        for r in e.reasons:
            if r.code == ReviewCode.NOT_IN_SOURCE:
                assert "re-decodes" in r.detail or r.label is None
        assert e.retries <= RETRIES_PER_VALUE * len(doc.labels)
    assert [record(e) for e in engine.extract(docs).extractions] == [record(e) for e in extractions]
    # The reference engine runs the same loop on the same generations.
    reference = Extractor(ReferenceRunner(loaded, msgspec.structs.replace(settings, constrained=False)))
    assert [e.retries for e in reference.extract(docs).extractions] == [e.retries for e in extractions]


def test_typed_values_that_fail_their_type_are_retried(memorised) -> None:
    loaded, settings = memorised
    engine = Extractor(FastRunner(loaded, settings))
    docs = [
        typed(d, {"电话": "phone"}, text=d.text + " 电话13800138000，备用电话1380013。", labels=(*d.labels[:3], "电话"))
        for d in unseen_documents()
    ]
    extractions = engine.extract(docs).extractions
    for e in extractions:
        # A value still mistyped after its retries stays in the record for the reviewer, with its reason.
        mistyped = {r.value for r in e.reasons if r.label == "电话" and r.code == ReviewCode.TYPE_MISMATCH}
        assert all(matches("phone", s.text) or s.text in mistyped for s in e.fields.get("电话", []))
        assert all("phone" in r.detail for r in e.reasons if r.code == ReviewCode.TYPE_MISMATCH)
    assert [record(e) for e in engine.extract(docs).extractions] == [record(e) for e in extractions]


def test_margin_is_the_least_certain_steps_gap(memorised) -> None:
    loaded, settings = memorised
    engine = Extractor(FastRunner(loaded, settings))
    from tests.conftest import memorised_documents

    g = memorised_documents()[0]
    [e] = engine.extract([Document(doc_id="m", text=g.text, task="extract", labels=tuple(g.values()))]).extractions
    spans = [s for spans in e.fields.values() for s in spans]
    assert spans and all(0 <= s.margin <= s.confidence <= 1 for s in spans)
    generation: Generation = e.traces[0].generation
    gaps = [p - sorted(top)[-2] for p, top in zip(generation.probs, generation.top_probs, strict=True)]
    assert min(s.margin for s in spans) >= min(gaps) - 1e-9


def generation(tokens: str, finished: bool = True) -> Generation:
    """A generation over one-character tokens (id = code point), with made-up signals."""
    ids = [ord(c) for c in tokens] + ([0] if finished else [])
    return Generation(
        token_ids=ids,
        probs=[0.5] * len(ids),
        entropies=[1.0] * len(ids),
        top_ids=[[t, ord("丁")] for t in ids],
        top_probs=[[0.5, 0.25]] * len(ids),
        finished=finished,
        forced=[False] * len(ids),
    )


def chars(ids: list[int]) -> str:
    return "".join(chr(t) for t in ids if t)


def test_a_local_re_decode_replaces_the_value_only() -> None:
    base = generation("人物: 七十\n地点: 西宁")
    # Re-decoded from the value's first step (4) with 丁: the continuation writes its own value and
    # goes on differently, but only the value is taken; the rest of the answer stays.
    rest = generation("伟\n地点: 别处")
    spliced = splice_value(base, 4, 6, ord("丁"), rest, chars)
    assert chars(spliced.token_ids) == "人物: 丁伟\n地点: 西宁"
    assert spliced.finished and len(spliced.probs) == len(spliced.token_ids) == len(spliced.forced)
    assert spliced.probs[4] == 0.25  # the alternative's own probability at the step it replaced
    # A value that does not end within its token budget is no candidate.
    assert splice_value(base, 4, 6, ord("丁"), generation("伟伟伟", finished=False), chars) is None
    # The last line's value ends at end of sequence.
    last = generation("人物: 七十")
    assert chars(splice_value(last, 4, 6, ord("丁"), generation("伟"), chars).token_ids) == "人物: 丁伟"


def test_names_that_fail_their_lexicon_are_re_decoded_locally(memorised) -> None:
    loaded, settings = memorised
    engine = Extractor(FastRunner(loaded, settings))
    docs = [typed(d, {label: "person" for label in d.labels}) for d in unseen_documents()]
    extractions = engine.extract(docs).extractions
    assert sum(e.retries for e in extractions) > 0
    for e in extractions:
        mistyped = {r.value for r in e.reasons if r.code == ReviewCode.TYPE_MISMATCH}
        assert all(matches("person", s.text) or s.text in mistyped for spans in e.fields.values() for s in spans)
    assert [record(e) for e in engine.extract(docs).extractions] == [record(e) for e in extractions]


def test_a_name_cut_mid_word_is_no_failure_the_loop_re_decodes(tiny_model_dir: Path) -> None:
    """The grammar keeps name-like values on word edges; a cut one found anyway (free decoding) goes
    to review as it is, without a re-decode."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "劳动合同摘要。甲方：上海恒达物流有限公司，乙方：王伟。"
    doc = Document(doc_id="d", text=text, task="extract", labels=("甲方", "乙方"))
    answer = "甲方: 上海恒达物流有限公司\n乙方: 王"
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    cut = Generation(
        token_ids=ids,
        probs=[0.9] * len(ids),
        entropies=[0.1] * len(ids),
        top_ids=[[i, 5] for i in ids],
        top_probs=[[0.9, 0.05]] * len(ids),
        finished=True,
    )
    decode = lambda t: tokenizer.decode(list(t), skip_special_tokens=True)  # noqa: E731
    assert value_problem(doc, "乙方", "王") is not None
    assert value_problem(doc, "乙方", "王")[0] is ReviewCode.VALUE_BOUNDARY
    assert first_failure(doc, doc.labels, cut, decode, skip=set()) is None


def test_the_demo_model_cuts_no_name_mid_word() -> None:
    """The shipped demo model on the free-phrasing corpus cut names (林雨 for 林雨桐) before the
    grammar held name-like values to word edges; now none is cut, and no pass is spent re-decoding
    one (only what no word edge tells could still go to review: a bare surname, or a word that is the
    head of an organisation the text names, 成都 for 成都锦江物流股份有限公司)."""
    docs, _, _ = read_corpus(Path(__file__).resolve().parent.parent / "ops" / "corpus" / "freeform.jsonl")
    settings = EngineSettings(path=str(DEMO_MODEL_DIR))
    engine = Extractor(FastRunner(load_model(settings), settings))
    extractions = engine.extract(docs).extractions
    cuts = [r for e in extractions for r in e.reasons if r.code is ReviewCode.VALUE_BOUNDARY]
    assert all(r.value in surnames() or "part of the organisation" in r.detail for r in cuts), cuts
    assert any("part of the organisation '成都锦江物流股份有限公司'" in r.detail for r in cuts)
    names = [
        s
        for e, d in zip(extractions, docs, strict=True)
        for label, spans in e.fields.items()
        for s in spans
        if name_like(d, label)
    ]
    assert names
    assert [record(e) for e in engine.extract(docs).extractions] == [record(e) for e in extractions]


def test_a_value_only_request_ends_where_its_value_does() -> None:
    """A local re-decode wants its value alone: a `value_only` request ends at its first token that
    holds a tab or newline, with the tokens and signals the full decode had up to there, in fewer
    passes; transformers' generate() (the reference runner) ends its rows at the same token."""
    settings = EngineSettings(path=str(DEMO_MODEL_DIR), max_new_tokens=48)
    loaded = load_model(settings)
    fast = FastRunner(loaded, settings)
    docs = [decode_document(msgspec.json.encode(raw), 1 << 20) for raw, _ in sample_documents(6, seed=4)]
    requests = [
        Request(prompt, p.grammar(c), doc=d)
        for d, p in enumerate(prepare(fast, docs))
        for c, prompt in enumerate(p.encoded.prompts)
    ]
    whole = fast.generate(requests)
    value_only = [dataclasses.replace(r, value_only=True) for r in requests]
    values = fast.generate(value_only)
    breaking = fast.constrainer.tokens.breaking
    for full, value in zip(whole.generations, values.generations, strict=True):
        end = next((i + 1 for i, t in enumerate(full.token_ids) if t in breaking or t == fast.eos_id), None)
        assert end is not None and end < len(full.token_ids)
        assert value.token_ids == full.token_ids[:end]
        assert (value.probs, value.top_ids) == (full.probs[:end], full.top_ids[:end])
    assert values.passes.decode < whole.passes.decode
    reference = ReferenceRunner(loaded, settings).generate(value_only)
    assert [g.token_ids for g in reference.generations] == [g.token_ids for g in values.generations]


def test_a_values_alternatives_are_decoded_in_one_round(memorised) -> None:
    """Every failing value's alternatives go to the model in one call (sharing their prompt and the
    answer before the value), so re-decodes cost one round per value, not one per alternative tried.
    The first that passes is kept, which is what trying them in turn keeps, because each row decodes
    as it would alone: checked here for every request of every round."""
    loaded, settings = memorised
    runner = FastRunner(loaded, settings)
    docs = [typed(d, {label: "person" for label in d.labels}) for d in unseen_documents()]
    prepared = prepare(runner, docs)
    generations, _ = generate(runner, prepared)
    rounds: list[int] = []

    def redecode(requests: list[Request]) -> list[Generation]:
        rounds.append(len(requests))
        together = runner.generate(requests).generations
        alone = [runner.generate([dataclasses.replace(r, doc=0)]).generations[0] for r in requests]
        assert [(g.token_ids, g.probs) for g in together] == [(g.token_ids, g.probs) for g in alone]
        return together

    retries = revisit(
        docs,
        [p.encoded.chunks for p in prepared],
        [p.encoded.prompts for p in prepared],
        generations,
        Detokenizer(runner.tokenizer, runner.constrainer.tokens),
        lambda d, c: prepared[d].grammar(c),
        redecode,
        settings.max_new_tokens,
    )
    per_chunk = [chunk for doc in retries for chunk in doc]
    # One round per value re-decoded in a chunk (at most), where trying in turn took one per attempt.
    assert 0 < len(rounds) <= max(len(chunk) for chunk in per_chunk)
    assert max(sum(chunk.values()) for chunk in per_chunk) > len(rounds)
