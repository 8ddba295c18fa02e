"""The regex/lexicon baseline and the eval table that sets it beside the product."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from click.testing import CliRunner

from ops.cli import cli
from ops.corpus import generate_corpus, write_corpus
from ops.eval.accuracy import evaluate_file
from ops.eval.baseline import RuleEngine, find_values
from ops.eval.table import BASELINE, PRODUCT, compare, format_table
from schemas.decode import decode_document


def test_baseline_finds_values_as_spans_of_the_text_and_never_asks_for_review(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, generate_corpus(25, seed=3))
    docs = [decode_document(line, 1 << 20) for line in corpus.read_bytes().splitlines()]
    for doc, extraction in zip(docs, RuleEngine().extract(docs).extractions, strict=True):
        assert set(extraction.fields) == set(doc.labels)
        assert all(doc.text[s.start : s.end] == s.text for spans in extraction.fields.values() for s in spans)
        assert not extraction.needs_review
    table = evaluate_file(RuleEngine(), corpus, batch_size=8).as_dict()
    # The rules were written against these templates: a strong baseline on clean text.
    assert table["micro"]["f1"] > 0.7
    assert table["hallucination_rate"] == 0.0 and table["validity_rate"] == 1.0
    assert set(table["kinds"]) == {"contract", "job_ad", "resume", "news", "medical"}


def test_rules_break_on_wording_they_were_not_written_for() -> None:
    assert find_values("姓名：张伟\n", "姓名") == [(3, 5)]
    assert find_values("应聘人张伟，男\n", "姓名") == []
    # A distractor of the right type before the value: the first date wins, right or wrong.
    text = "合同期限自2024年1月2日起。本合同于2023年12月1日签订"
    assert [text[a:b] for a, b in find_values(text, "签约日期")] == ["2023年12月1日"]
    assert [text[a:b] for a, b in find_values(text.replace("本合同于", "签于"), "签约日期")] == ["2024年1月2日"]


def test_eval_table_sets_the_product_beside_the_baseline(tiny_model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SEQSTREAM_MODEL__MAX_NEW_TOKENS", "8")
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, generate_corpus(5, seed=3))
    out = tmp_path / "table.json"
    args = ["eval", "--model", str(tiny_model_dir), "--data", str(corpus), "--json", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for text in (PRODUCT, BASELINE, "micro", "contract", "hallucination", "valid output", "alerts", "docs/s"):
        assert text in result.output
    table = json.loads(out.read_text())
    assert set(table["systems"]) >= {PRODUCT, BASELINE}
    assert table["systems"][BASELINE]["micro"]["f1"] > table["systems"][PRODUCT]["micro"]["f1"]


def test_table_rows_line_up_with_chinese_labels(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, generate_corpus(5, seed=3))
    lines = format_table(compare([("a", RuleEngine()), ("b", RuleEngine())], corpus, 8)).splitlines()
    rows = [line for line in lines if line.count(" | ") == 2]
    # The column separators sit at the same terminal column in every row (CJK characters are two wide).
    widths = {_display_width(row.split(" | ")[0]) for row in rows}
    assert len(widths) == 1, widths


def _display_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
