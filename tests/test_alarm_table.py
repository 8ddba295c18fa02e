"""ops/eval/alarm.py: the alarm's flags per deciding step at several thresholds, counted as it says."""

from __future__ import annotations

import msgspec

from model.build import build_engine
from model.config import EngineSettings
from ops.corpus.generate import generate_corpus
from ops.eval.alarm import THRESHOLDS, Step, deciding_steps, report
from schemas.decode import decode_document
from tests.conftest import TEST_MAX_NEW_TOKENS


def test_the_table_counts_flags_by_what_was_decided_and_documents_once() -> None:
    assert THRESHOLDS == (0.3, 0.69, 1.0, 2.5)
    rows = [
        Step("a", "value", True, 3.0, doubted=False, reviewed=True),
        Step("a", "value", False, 0.8, doubted=True, reviewed=True),
        Step("b", "None", False, 1.2, doubted=False, reviewed=False),
    ]
    lines = report("corpus", 2, rows).splitlines()
    assert lines[0] == "== corpus: 3 deciding steps in 2 documents (flagged/alone)"
    assert lines[2].split() == ["value", "right", "1", "1/1", "1/1", "1/1", "1/1"]
    assert lines[3].split() == ["value", "wrong", "1", "1/0", "1/0", "0/0", "0/0"]
    assert lines[4].split() == ["None", "wrong", "1", "1/1", "1/1", "1/1", "0/0"]
    assert lines[5].split() == ["documents", "alarmed", "2", "2", "2", "1"]
    # Document b goes to review for its alarm alone; a's other checks send it anyway.
    assert lines[6].split() == ["of", "them", "by", "it", "alone", "1", "1", "1", "0"]


def test_every_deciding_step_of_a_real_run_is_listed(tiny_model_dir) -> None:
    generated = list(generate_corpus(2, seed=3))
    docs = [decode_document(msgspec.json.encode(d.raw()), 1 << 24) for d in generated]
    truth = {d.doc_id: d.values() for d in generated}
    settings = EngineSettings(path=str(tiny_model_dir), max_new_tokens=TEST_MAX_NEW_TOKENS, entropy_threshold=0.0)
    extractions = build_engine(settings).extract(docs).extractions
    rows = deciding_steps(docs, extractions, truth)
    assert rows and {r.doc_id for r in rows} <= {d.doc_id for d in docs}
    # Every deciding step with something left to choose is listed (the engine alarms above 0 nats).
    assert all(r.entropy > 0 for r in rows)
    assert len(rows) == sum(len(ex.alarmed) for ex in extractions)
