"""The document generator: deterministic, offsets exact, every kind, lengths in range, noise
that never touches a value, and files the pipeline's own decoder accepts."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ops.cli import cli
from ops.corpus import KINDS, generate_corpus, generate_document, read_truth
from ops.corpus.generate import MAX_CHARS, MIN_CHARS, truth_path
from schemas.decode import decode_document
from schemas.field_sets import FIELD_SETS

COUNT = 200


@pytest.fixture(scope="module")
def noisy():
    return list(generate_corpus(COUNT, seed=5, noise=0.05))


def test_same_seed_same_corpus_and_other_seed_other_corpus() -> None:
    first = [d.truth_line() | {"text": d.text} for d in generate_corpus(20, seed=3, noise=0.02)]
    again = [d.truth_line() | {"text": d.text} for d in generate_corpus(20, seed=3, noise=0.02)]
    other = [d.truth_line() | {"text": d.text} for d in generate_corpus(20, seed=4, noise=0.02)]
    assert first == again
    assert all(a["text"] != b["text"] for a, b in zip(first, other, strict=True))


def test_a_document_does_not_depend_on_the_corpus_size() -> None:
    assert list(generate_corpus(12, seed=9))[11] == generate_document(sorted(KINDS)[11 % 5], 9, 11)


def test_every_ground_truth_offset_points_at_its_value(noisy) -> None:
    spans = 0
    for doc in noisy:
        for spans_of_label in doc.truth.values():
            for span in spans_of_label:
                assert doc.text[span.start : span.end] == span.text
                spans += 1
    assert spans > COUNT * 4


def test_labels_are_exactly_the_field_sets_and_some_are_missing(noisy) -> None:
    missing = 0
    for doc in noisy:
        assert tuple(doc.truth) == FIELD_SETS[doc.kind]
        missing += sum(not spans for spans in doc.truth.values())
    assert missing > 0


def test_each_kind_present_and_lengths_in_range(noisy) -> None:
    assert {doc.kind for doc in noisy} == set(KINDS)
    assert all(MIN_CHARS <= len(doc.text) <= MAX_CHARS for doc in noisy)


def test_noise_changes_text_but_never_a_value() -> None:
    clean = list(generate_corpus(50, seed=8))
    noisy = list(generate_corpus(50, seed=8, noise=0.1))
    assert sum(c.text != n.text for c, n in zip(clean, noisy, strict=True)) == 50
    for c, n in zip(clean, noisy, strict=True):
        assert c.values() == n.values()
        assert all(n.text[s.start : s.end] == s.text for spans in n.truth.values() for s in spans)


def test_surface_forms_vary(noisy) -> None:
    texts = "".join(doc.text for doc in noisy)
    for form in ("以下简称", "元整", "２", "年", "-", "/"):
        assert form in texts


def test_cli_writes_raw_documents_and_a_truth_sidecar(tmp_path) -> None:
    out = tmp_path / "corpus.jsonl"
    result = CliRunner().invoke(cli, ["corpus", "generate", "--count", "10", "--seed", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert len(lines) == 10
    # Plain RawDocument lines: the decoder the pipeline uses accepts every one.
    docs = [decode_document(line, 1 << 20) for line in lines]
    truth = read_truth(out)
    assert set(truth) == {d.doc_id for d in docs}
    for doc in docs:
        for values in truth[doc.doc_id].values():
            assert all(v in doc.text for v in values)
    assert json.loads(truth_path(out).read_text().splitlines()[0])["kind"] in KINDS
