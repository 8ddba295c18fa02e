"""Long generated documents and the evaluation that scores them per length bucket beside the head-only baseline."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from model.windows.split import split_text
from ops.cli import cli
from ops.corpus import generate_corpus, write_corpus
from ops.corpus.long import MAX_LONG_CHARS, MIN_LONG_CHARS
from ops.eval.table import HEAD_ONLY, PRODUCT
from schemas.field_sets import SINGLE_VALUE_LABELS


def test_long_documents_have_their_values_everywhere_including_across_window_cuts() -> None:
    docs = list(generate_corpus(30, seed=11, long=True))
    assert {d.kind for d in docs} == {"contract", "news", "medical"}
    straddling = 0
    for doc in docs:
        assert MIN_LONG_CHARS <= len(doc.text) <= MAX_LONG_CHARS
        spans = [s for spans in doc.truth.values() for s in spans]
        assert all(doc.text[s.start : s.end] == s.text for s in spans)
        assert min(s.start for s in spans) < 100 and max(s.end for s in spans) > len(doc.text) - 400
        assert all(len(doc.truth[label]) <= 1 for label in SINGLE_VALUE_LABELS[doc.kind])
        # With one token per character, as the demo model reads, and its window's room for text.
        windows = split_text(doc.text, list(range(1, len(doc.text) + 1)), 990, 128)
        straddling += sum(any(s.start < w.end < s.end for w in windows) for s in spans)
    assert straddling > 0


def test_eval_scores_long_documents_per_length_bucket_beside_the_head_only_column(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("SEQSTREAM_MODEL__MAX_NEW_TOKENS", "8")
    corpus = tmp_path / "long.jsonl"
    write_corpus(corpus, [*generate_corpus(2, seed=5, long=True), *generate_corpus(1, seed=5)])
    out = tmp_path / "table.json"
    args = ["eval", "--model", str(tiny_model_dir), "--data", str(corpus), "--json", str(out)]
    result = CliRunner().invoke(cli, [*args, "--systems", f"{PRODUCT},{HEAD_ONLY}"])
    assert result.exit_code == 0, result.output
    for text in (HEAD_ONLY, "up to 1k", "windows/doc", "spans off text", "values twice", "chars/s"):
        assert text in result.output
    systems = json.loads(out.read_text())["systems"]
    assert set(systems) == {PRODUCT, HEAD_ONLY}
    product, head = systems[PRODUCT], systems[HEAD_ONLY]
    assert product["windows_per_doc"] > 1 and head["windows_per_doc"] == 1
    assert product["misplaced_spans"] == 0 and product["repeated_values"] == 0
    assert sum(b["documents"] for b in product["buckets"].values()) == product["micro"]["documents"]
