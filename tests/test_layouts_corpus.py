"""The second hand-written corpus (ops/corpus/layouts.txt): real-world layouts, truth marked in place,
its files the builder's output, and none of the training templates' wording inside it."""

from __future__ import annotations

import json

from ops.corpus import KINDS
from ops.corpus.free import SLOT, TEMPLATES
from ops.corpus.generate import truth_path
from ops.corpus.layouts import CORPUS, lines, parse
from ops.eval.accuracy import read_corpus
from schemas.field_sets import FIELD_SETS


def test_checked_in_files_are_the_builders_output_from_the_marked_source() -> None:
    raw, truth = lines()
    assert CORPUS.read_text(encoding="utf-8").splitlines() == raw
    assert truth_path(CORPUS).read_text(encoding="utf-8").splitlines() == truth


def test_truth_sits_at_its_offsets_in_every_kind_with_absent_labels() -> None:
    docs, _, kinds = read_corpus(CORPUS)
    assert len(docs) >= 40 and set(kinds.values()) == set(KINDS)
    texts = {doc.doc_id: doc.text for doc in docs}
    absent = 0
    for line in truth_path(CORPUS).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert tuple(record["ground_truth"]) == FIELD_SETS[record["kind"]]
        for spans in record["ground_truth"].values():
            absent += not spans
            assert all(texts[record["doc_id"]][s["start"] : s["end"]] == s["text"] for s in spans)
    assert absent >= 20


def test_a_mark_of_an_unknown_label_is_refused() -> None:
    try:
        parse("=== x-1 contract\n{姓名:张三}")
    except ValueError as error:
        assert "姓名" in str(error)
    else:
        raise AssertionError("a résumé label in a contract was accepted")


def test_no_training_template_wording_is_in_the_corpus() -> None:
    texts = [doc.text for doc in read_corpus(CORPUS)[0]]
    # The fixed words between a template's slots, six characters or more: a shared phrase that long
    # would be a cue the model learnt, not reading.
    pieces = {p.strip("，。；：") for t in (t for ts in TEMPLATES.values() for t in ts) for p in SLOT.split(t)[::2]}
    shared = [p for p in pieces if len(p) >= 6 and any(p in text for text in texts)]
    assert shared == []
