"""ops/eval/alarm.py: the two alarm signals per deciding step, counted as it says."""

from __future__ import annotations

import math

import msgspec
import pytest

from model.answers.validate import AlarmedStep, DecodeTrace, Extraction
from model.build import build_engine
from model.config import EngineSettings
from model.signals import Generation
from ops.corpus.generate import generate_corpus
from ops.eval.alarm import Step, deciding_steps, legal_entropy, report, rules_report
from schemas.decode import decode_document
from schemas.messages import ReviewCode, ReviewReason, Span
from tests.conftest import TEST_MAX_NEW_TOKENS


def test_legal_entropy_counts_the_mass_beyond_the_runners_up_as_one_lump() -> None:
    assert legal_entropy([0.25] * 4) == pytest.approx(math.log(4))
    assert legal_entropy([1.0, 0.0]) == 0.0
    assert legal_entropy([0.5, 0.25]) == pytest.approx(-0.5 * math.log(0.5) - 2 * 0.25 * math.log(0.25))


def test_the_table_counts_flags_by_what_was_decided_and_documents_once() -> None:
    rows = [
        Step("a", "value", True, 3.0, 0.1, doubted=False),
        Step("a", "value", False, 1.0, 0.7, doubted=True),
        Step("b", "None", False, 2.6, 1.2, doubted=False),
    ]
    lines = report("corpus", 2, rows).splitlines()
    assert lines[0] == "== corpus: 3 deciding steps in 2 documents (flagged/alone)"
    assert lines[2].split() == ["value", "right", "1", "1/1", "0/0", "0/0", "0/0"]
    assert lines[3].split() == ["value", "wrong", "1", "0/0", "1/0", "1/0", "0/0"]
    assert lines[4].split() == ["None", "wrong", "1", "1/1", "1/1", "1/1", "1/1"]
    assert lines[5].split() == ["documents", "alarmed", "2", "2", "2", "1"]


def test_every_deciding_step_of_a_real_run_is_listed_with_both_signals(tiny_model_dir) -> None:
    generated = list(generate_corpus(2, seed=3))
    docs = [decode_document(msgspec.json.encode(d.raw()), 1 << 24) for d in generated]
    truth = {d.doc_id: d.values() for d in generated}
    settings = EngineSettings(path=str(tiny_model_dir), max_new_tokens=TEST_MAX_NEW_TOKENS, entropy_threshold=0.0)
    rows = deciding_steps(docs, build_engine(settings).extract(docs).extractions, truth)
    assert rows and {r.doc_id for r in rows} <= {d.doc_id for d in docs}
    # A random model: unsure everywhere, in the full distribution and among the legal tokens.
    assert all(r.full > 0 and r.legal >= 0 for r in rows)


def _record(
    doc, values: dict[str, list[str]], steps: list[tuple[float, list[float]]], review: bool = False
) -> Extraction:
    """A record holding `values` (found in the text), with one deciding step per (full entropy, legal
    runners-up' probabilities), and a low-confidence reason where `review`."""
    fields = {
        label: [
            Span(text=v, start=doc.text.index(v), end=doc.text.index(v) + len(v), confidence=1.0, margin=1.0)
            for v in vs
        ]
        for label, vs in values.items()
    }
    generation = Generation(top_probs=[probs for _, probs in steps])
    reasons = [ReviewReason(code=ReviewCode.LOW_CONFIDENCE, detail="test")] if review else []
    return Extraction(
        doc.doc_id,
        fields=fields,
        reasons=reasons,
        alarmed=[AlarmedStep(full, 0, i, None, None) for i, (full, _) in enumerate(steps)],
        traces=[DecodeTrace((), generation, [])],
    )


def test_each_rule_sends_the_records_it_does_not_alarm_to_fields_and_counts_their_misses() -> None:
    generated = list(generate_corpus(3, seed=3))
    docs = [decode_document(msgspec.json.encode(d.raw()), 1 << 24) for d in generated]
    truth = {d.doc_id: d.values() for d in generated}
    a, b, c = docs
    sure, torn = [0.99], [0.4, 0.3, 0.3]  # legal entropies about 0.06 and 1.09 nats
    right_a = {label: vs for label, vs in truth[a.doc_id].items() if vs}
    short_b = {label: vs for label, vs in truth[b.doc_id].items() if vs}
    dropped = sorted(short_b)[0]
    del short_b[dropped]
    steps_of = [
        _record(a, right_a, [(3.0, sure), (0.5, sure)]),  # one step above 2.5
        _record(b, short_b, [(3.0, sure), (2.6, sure), (0.1, sure)]),  # two above 2.5, a value missing
        _record(c, {}, [(1.0, torn)]),  # torn, and in review for another reason
    ]
    quiet = [_record(a, right_a, []), _record(b, short_b, []), _record(c, {}, [], review=True)]
    expected_a = sum(len(set(vs)) for vs in right_a.values())
    expected_b = sum(len(set(vs)) for vs in truth[b.doc_id].values())
    missing_b = len(set(truth[b.doc_id][dropped]))
    rows = {
        line[:31].strip(): line[31:].split() for line in rules_report(docs, steps_of, quiet, truth).splitlines()[1:]
    }
    assert rows == {
        "full>2.5 x1 (product)": ["2", "0", "0/0"],
        "full>2.5 x2": ["1", "1", f"0/{expected_a}"],
        "full>2.5 x3": ["0", "2", f"{missing_b}/{expected_a + expected_b}"],
        "legal>ln2": ["1", "2", f"{missing_b}/{expected_a + expected_b}"],
        "full>2.5 x2 or legal>ln2": ["2", "1", f"0/{expected_a}"],
    }
