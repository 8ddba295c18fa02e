"""The hand-written free-phrasing corpus (ops/corpus/freeform.jsonl): documents the pipeline accepts,
truth at its offsets, every kind, absent labels, and a table from `seqstream-ops eval`."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ops.cli import cli
from ops.corpus import KINDS
from ops.corpus.generate import truth_path
from ops.eval.accuracy import read_corpus
from ops.eval.table import BASELINE
from ops.train.demo_model import FREEFORM_CORPUS
from schemas.field_sets import FIELD_SETS


def test_freeform_truth_sits_at_its_offsets_and_some_labels_are_absent() -> None:
    docs, _, kinds = read_corpus(FREEFORM_CORPUS)
    assert len(docs) >= 40 and set(kinds.values()) == set(KINDS)
    lines = [json.loads(line) for line in truth_path(FREEFORM_CORPUS).read_text(encoding="utf-8").splitlines()]
    texts = {doc.doc_id: doc.text for doc in docs}
    absent = 0
    for line in lines:
        assert tuple(line["ground_truth"]) == FIELD_SETS[line["kind"]]
        for spans in line["ground_truth"].values():
            absent += not spans
            assert all(texts[line["doc_id"]][s["start"] : s["end"]] == s["text"] for s in spans)
    assert absent >= 20


def test_eval_prints_a_table_per_field_for_the_freeform_corpus(tmp_path) -> None:
    out = tmp_path / "table.json"
    args = ["eval", str(FREEFORM_CORPUS), "--systems", BASELINE, "--json", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "micro" in result.output and all(label in result.output for label in FIELD_SETS["medical"])
    assert json.loads(out.read_text())["systems"][BASELINE]["documents"] >= 40
