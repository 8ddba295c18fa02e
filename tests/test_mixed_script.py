"""Mixed-script and scan-shaped values in the open-vocabulary stream (ops/corpus/mixed_script.py,
english_forms.py): Latin and mixed names, English legal forms, addresses, dates, amounts, English
sex/degree/salary/age/hospital forms, spaces inside values, e-mails;
every value still a span at its offsets, in the demo tokenizer's characters."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from ops.corpus import KINDS, generate_document
from ops.corpus import mixed_script as ms
from ops.corpus.english_forms import MAKERS
from ops.corpus.layouts import CORPUS
from ops.corpus.surface import FULL_WIDTH

LATIN = re.compile(r"[A-Za-z]")
LATIN_WORD = re.compile(r"[A-Za-z]+")
HAN = re.compile(r"[\u4e00-\u9fff]")
TOKENIZER = Path(__file__).resolve().parents[1] / "model" / "demo" / "tokenizer.json"


@pytest.fixture(scope="module")
def documents():
    kinds = sorted(KINDS)
    return [generate_document(kinds[i % 5], 11, i, open_vocab=True) for i in range(400)]


def _values(documents, labels):
    return [v for doc in documents for label in labels for v in doc.values().get(label, [])]


def test_every_value_is_a_span_at_its_offsets(documents) -> None:
    for doc in documents:
        for spans in doc.truth.values():
            assert all(doc.text[s.start : s.end] == s.text for s in spans)


def test_mixed_shapes_are_a_share_of_the_open_stream(documents) -> None:
    people = _values(documents, ms.PERSON_LABELS)
    latin = [p for p in people if LATIN.search(p)]
    mixed = [p for p in latin if HAN.search(p)]
    # SHARE of documents reshaped, half of their values: about a fifth of the people, not all.
    assert 0.08 * len(people) < len(latin) < 0.4 * len(people)
    assert len(mixed) > 10
    organisations = _values(documents, ms.ORG_LABELS)
    assert any(o.endswith(("Ltd.", "GmbH", "Inc.", "LLC", "Co.")) for o in organisations)
    assert any(LATIN.search(o) and o.endswith("有限公司") for o in organisations)
    places = _values(documents, ms.PLACE_LABELS)
    assert any(re.search(r"\d+号.*(层|室|F)$", p) for p in places) and any("Road" in p for p in places)
    dates = _values(documents, ms.DATE_LABELS)
    assert any(re.search(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b", d) for d in dates)
    assert any(d.startswith("二〇") or d.startswith("一九") for d in dates)
    amounts = _values(documents, ["合同金额"])
    assert any(a.startswith(("RMB", "USD", "CNY")) for a in amounts)
    values = [v for doc in documents for vs in doc.values().values() for v in vs]
    assert any(re.search(r"[\u4e00-\u9fff] [\u4e00-\u9fff]", v) for v in values)  # a scan's space inside
    assert not any("\n" in v or "\t" in v for v in values)  # they end a value in the answer
    english = {label: _values(documents, [label]) for label in ("性别", "年龄", "医院名称", "薪资范围", "学历")}
    assert any(v in ("Male", "Female", "M", "F") for v in english["性别"])
    assert any(re.search(r"\d+ ?(years old|y|yrs)$|^Age", v) for v in english["年龄"])
    assert any(v.endswith(("Hospital", "Center", "Branch")) for v in english["医院名称"])
    assert any(v.endswith(("/month", "/year", "k")) for v in english["薪资范围"])
    assert any(v.startswith(("Bachelor", "Master")) for v in english["学历"])
    assert sum(doc.text.startswith("From: ") and "Subject: " in doc.text for doc in documents) > 10


def test_scanning_only_adds_spaces_widens_digits_or_misreads_one_beside_hanzi() -> None:
    rng = random.Random(3)
    for value in ["杭州青木科技有限公司", "陈德胜", "13812345678", "2024/3/5", "Derek 刘", "2015年8月10日"]:
        for _ in range(30):
            scanned = ms.scanned(rng, value).replace(" ", "")
            unmisread = scanned.translate(str.maketrans({v: k for k, v in ms.MISREAD.items()}))
            plain = value.replace(" ", "")
            assert scanned in (plain, plain.translate(FULL_WIDTH)) or (HAN.search(value) and unmisread == plain)


def test_mixed_values_are_spelt_by_the_demo_tokenizer(documents) -> None:
    vocab = json.loads(TOKENIZER.read_text(encoding="utf-8"))["model"]["vocab"]
    rng = random.Random(5)
    made = [ms.person(rng) for _ in range(200)] + [ms.organisation(rng) for _ in range(200)]
    made += [ms.address(rng) for _ in range(200)] + [ms.money(rng, 123_000) for _ in range(50)]
    made += [make(rng) for make in MAKERS.values() for _ in range(50)]
    # ￥ (full-width yen) alone falls back to bytes: hand-written documents use it, so it stays.
    assert {char for value in made for char in value if char not in vocab} <= {"￥"}


def test_no_given_name_or_brand_is_taken_from_the_held_out_corpora() -> None:
    held_out = "".join(path.read_text(encoding="utf-8") for path in CORPUS.parent.glob("*.jsonl"))
    words = {word.lower() for word in LATIN_WORD.findall(held_out)}
    brands = {part + tail for part in ms.BRAND_PARTS for tail in ms.BRAND_TAILS}
    assert [w for w in [*ms.ENGLISH_GIVEN, *brands] if w.lower() in words] == []


def test_same_seed_same_document() -> None:
    assert generate_document("news", 4, 17, open_vocab=True) == generate_document("news", 4, 17, open_vocab=True)
