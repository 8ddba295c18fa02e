"""ops/eval/alarm.py: the two alarm signals per deciding step, counted as it says."""

from __future__ import annotations

import math

import msgspec
import pytest

from model.build import build_engine
from model.config import EngineSettings
from ops.corpus.generate import generate_corpus
from ops.eval.alarm import Step, deciding_steps, legal_entropy, report
from schemas.decode import decode_document
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
