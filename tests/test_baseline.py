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
from ops.eval.lexicon import LacEngine, LexiconEngine, find_all, lac_entities
from ops.eval.peers import ElseEngine, hand_written_corpora
from ops.eval.table import BASELINE, LAC, LEXICON, PRODUCT, PRODUCT_ELSE_LAC, SUMMARY, compare, format_table
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
    wanted = (
        PRODUCT,
        BASELINE,
        LEXICON,
        LAC,
        PRODUCT_ELSE_LAC,
        *SUMMARY,
        "micro",
        "contract",
        "hallucination",
        "valid output",
        "alerts",
        "docs/s",
    )
    for text in (*wanted, "to fields", "fields wrong/miss"):
        assert text in result.output
    table = json.loads(out.read_text())
    assert set(table["systems"]) >= {PRODUCT, BASELINE, LEXICON, LAC, PRODUCT_ELSE_LAC}
    product = table["systems"][PRODUCT]
    # The product's decode, with the LAC script's values where it has none: routed as the product
    # routed, and finding at least what the product found.
    either = table["systems"][PRODUCT_ELSE_LAC]
    assert either["fields_share"] == product["fields_share"] and either["review_share"] == product["review_share"]
    assert either["micro"]["recall"] >= product["micro"]["recall"]
    assert table["systems"][LAC]["micro"]["recall"] > 0
    # Eight new tokens cannot answer a document: every record goes to review, none to fields.
    assert product["fields_share"] + product["review_share"] == 1.0
    assert sum(product["review_reasons"].values()) >= round(product["review_share"] * 5)
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


def _doc(text: str, field_set: str):
    return decode_document(json.dumps({"doc_id": "d", "text": text, "field_set": field_set}).encode(), 1 << 20)


def test_lexicon_baseline_gives_names_to_roles_in_the_order_first_seen() -> None:
    doc = _doc("患者王建国因咳嗽就诊，接诊医生李秀英，家属王建国陪同。诊断：感冒", "medical")
    found = {label: [doc.text[a:b] for a, b in spans] for label, spans in find_all(doc).items()}
    assert found["患者姓名"] == ["王建国"] and found["主治医师"] == ["李秀英"]
    # Reversed in the text, the roles are reversed too: order, not meaning, decides.
    swapped = _doc("接诊医生李秀英，患者王建国因咳嗽就诊", "medical")
    found = {label: [swapped.text[a:b] for a, b in spans] for label, spans in find_all(swapped).items()}
    assert found["患者姓名"] == ["李秀英"] and found["主治医师"] == ["王建国"]
    # Non-name labels go to the regex rules.
    assert found["诊断结果"] == []


def test_wrong_or_missing_counts_only_records_routed_to_fields(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, generate_corpus(10, seed=3))
    report = evaluate_file(LexiconEngine(), corpus, batch_size=8).as_dict()
    expected = sum(s["true_positives"] + s["false_negatives"] for s in report["fields"].values())
    # Nothing goes to review, so every expected value is a fields-routed one.
    assert report["fields_share"] == 1.0 and report["fields_expected"] == expected
    missed = sum(s["false_negatives"] for s in report["fields"].values())
    assert report["fields_wrong_or_missing"] == missed > 0
    assert report["review_reasons"] == {}


def test_lac_script_gives_names_to_roles_from_lacs_entities() -> None:
    doc = _doc("患者王建国因咳嗽就诊，接诊医生李秀英。诊断：感冒", "medical")
    assert ("person", 2, 5) in lac_entities(doc.text)
    found = {label: [doc.text[a:b] for a, b in spans] for label, spans in LacEngine().find(doc).items()}
    assert found["患者姓名"] == ["王建国"] and found["主治医师"] == ["李秀英"]


def test_product_else_lac_fills_only_what_the_first_left_empty() -> None:
    regex, lac = RuleEngine(), LacEngine()
    # The regex rules find the cued company and date; only LAC finds the uncued person.
    docs = [_doc("甲方：杭州云栖数智科技有限公司，决定聘用周晓梅，签约日期：2023年3月15日", "contract")]
    [combined] = ElseEngine(regex, lac).extract(docs).extractions
    [first] = regex.extract(docs).extractions
    [second] = lac.extract(docs).extractions
    for label in docs[0].labels:
        expected = first.fields.get(label) or second.fields.get(label) or []
        assert [s.text for s in combined.fields.get(label, [])] == [s.text for s in expected]
    assert any(not first.fields.get(label) and second.fields.get(label) for label in docs[0].labels)


def test_eval_reads_every_hand_written_corpus_by_default() -> None:
    names = [p.name for p in hand_written_corpora()]
    assert {"freeform.jsonl", "layouts.jsonl", "mixed.jsonl"} <= set(names)
    assert not any(n.endswith(".truth.jsonl") for n in names)
