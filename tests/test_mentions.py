"""A text without a month's or a currency's name is searched for dates and amounts without the English
alternatives (model/values/mentions.py): the mentions must be those the whole patterns find."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.values import mentions as found_in
from ops.demo.samples import sample_documents

CORPORA = sorted(p for p in Path("ops/corpus").glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))
ENGLISH = [
    "签约日期：June 12, 2025，金额 US Dollars Sixty-Two Thousand Four Hundred Only",
    "Signed on the twenty-first day of March, 2024 in Shanghai; fee: RMB Five Thousand",
    "28 February 2026 入职，年薪 USD Eighty Thousand",
    "SEPT 3rd, 2023 及 Sep 4, 2023；EUR Ten Thousand，Hong Kong Dollars Twelve Thousand",
    "二〇二四年十二月三十一日，人民币叁拾\n陆万元整，2020年12月\n 8日",
]


def _texts() -> list[str]:
    hand_written = [json.loads(line)["text"] for path in CORPORA for line in path.read_text().splitlines() if line]
    return hand_written + [raw["text"] for raw, _ in sample_documents(100, seed=5)] + ENGLISH


@pytest.mark.parametrize("kind", ["date", "amount"])
def test_the_shortcut_finds_what_the_whole_pattern_finds(kind: str) -> None:
    cue, without = found_in._ENGLISH_CUES[kind]
    texts = _texts()
    shortened = [t for t in texts if not cue.search(t)]
    assert len(shortened) > 100 and len(shortened) < len(texts)  # both paths are exercised
    for text in texts:
        whole = found_in._matched(kind, found_in._PATTERNS[kind], text)
        assert found_in._matched(kind, found_in.pattern_for(kind, text), text) == whole, text
    assert {found_in.pattern_for(kind, t) for t in texts} == {found_in._PATTERNS[kind], without}


def test_english_dates_and_amounts_are_still_mentioned() -> None:
    found_in.mentions.cache_clear()
    first = found_in.mentions(ENGLISH[0])
    assert "June 12, 2025" in first["date"]
    assert any("Sixty-Two Thousand" in a for a in first["amount"])
    assert found_in.mentions(ENGLISH[1])["date"] == ("the twenty-first day of March, 2024",)
