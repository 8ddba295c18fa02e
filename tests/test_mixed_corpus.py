"""The third hand-written corpus (ops/corpus/mixed.txt): the shapes the first two lack, truth marked in
place, its files the builder's output, and none of the training templates' wording inside it."""

from __future__ import annotations

import json
import re

from ops.corpus import KINDS
from ops.corpus.free import SLOT, TEMPLATES
from ops.corpus.generate import truth_path
from ops.corpus.layouts import MIXED_CORPUS, MIXED_SOURCE, lines
from ops.corpus.open_layouts import PROSE
from ops.eval.accuracy import read_corpus
from ops.eval.peers import hand_written_corpora
from ops.train.demo_model import HAND_WRITTEN_CORPORA
from schemas.field_sets import FIELD_SETS


def _truth() -> list[dict]:
    return [json.loads(line) for line in truth_path(MIXED_CORPUS).read_text(encoding="utf-8").splitlines()]


def test_checked_in_files_are_the_builders_output_from_the_marked_source() -> None:
    raw, truth = lines(MIXED_SOURCE)
    assert MIXED_CORPUS.read_text(encoding="utf-8").splitlines() == raw
    assert truth_path(MIXED_CORPUS).read_text(encoding="utf-8").splitlines() == truth


def test_truth_sits_at_its_offsets_in_every_kind_with_absent_labels() -> None:
    docs, _, kinds = read_corpus(MIXED_CORPUS)
    assert len(docs) == 40 and set(kinds.values()) == set(KINDS)
    texts = {doc.doc_id: doc.text for doc in docs}
    absent = 0
    for record in _truth():
        assert tuple(record["ground_truth"]) == FIELD_SETS[record["kind"]]
        for spans in record["ground_truth"].values():
            absent += not spans
            assert all(texts[record["doc_id"]][s["start"] : s["end"]] == s["text"] for s in spans)
    assert absent >= 20


def test_the_shapes_the_first_two_corpora_lack_are_each_in_it_several_times() -> None:
    values = [s["text"] for r in _truth() for spans in r["ground_truth"].values() for s in spans]
    shapes = {
        "a Chinese-English name or company": r"[A-Za-z]{2,}.*[\u4e00-\u9fff]|[\u4e00-\u9fff].*[A-Za-z]{2,}",
        "an address with building and room numbers": r"\d+号.*(楼|座|幢|室)",
        "a date in words": r"[〇一二三四五六七八九]{4}年|[零壹贰叁肆伍陆柒捌玖]{4}年|day of",
        "an amount in words": r"[壹贰叁肆伍陆柒捌玖拾佰仟万]+元整|Thousand",
        "a value broken by OCR (a line break or a stray space inside)": r"\n|[\u4e00-\u9fff] [\u4e00-\u9fff]",
        "full-width letters or digits": r"[０-９Ａ-Ｚａ-ｚ]",
    }
    for shape, pattern in shapes.items():
        assert sum(bool(re.search(pattern, v)) for v in values) >= 3, shape
    # Several people or companies for one label, in every kind.
    listed = {r["kind"] for r in _truth() if any(len(spans) >= 2 for spans in r["ground_truth"].values())}
    assert listed == set(KINDS)


def test_eval_and_the_demo_model_export_score_it() -> None:
    assert MIXED_CORPUS in [path.resolve() for path in hand_written_corpora()]
    assert MIXED_CORPUS in [path for _, path, _ in HAND_WRITTEN_CORPORA]


def test_no_training_template_wording_is_in_the_corpus() -> None:
    texts = [doc.text for doc in read_corpus(MIXED_CORPUS)[0]]
    # The fixed words between a template's slots, six characters or more, of the free-phrasing and the
    # open-vocabulary generators: a shared phrase that long would be a cue the model learnt, not reading.
    templates = [t for ts in TEMPLATES.values() for t in ts] + [t for ts in PROSE.values() for t in ts]
    pieces = {p.strip("，。；：（）") for t in templates for p in SLOT.split(t)[::2]}
    assert [p for p in pieces if len(p) >= 6 and any(p in text for text in texts)] == []
