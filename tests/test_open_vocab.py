"""Open-vocabulary training documents (ops/corpus/open_layouts.py): values built from parts, not
drawn from closed lists, in the tokenizer's characters, in many layouts, with `None` and distractors."""

from __future__ import annotations

import random
import re

import pytest
from faker.providers.person import zh_CN

from ops.corpus import KINDS, generate_document
from ops.corpus import open_vocab as ov
from ops.corpus.free import SLOT
from ops.corpus.layouts import CORPUS
from ops.corpus.open_layouts import PROSE
from schemas.field_sets import FIELD_SETS

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def documents():
    # A document's seed is (corpus seed, index), whatever its kind: one index per document.
    kinds = sorted(KINDS)
    return [generate_document(kinds[i % 5], 5, i, open_vocab=True) for i in range(300)]


def test_truth_sits_at_its_offsets_and_some_labels_are_absent(documents) -> None:
    absent = 0
    for doc in documents:
        assert tuple(doc.truth) == FIELD_SETS[doc.kind]  # type: ignore[index]
        for spans in doc.truth.values():
            absent += not spans
            assert all(doc.text[s.start : s.end] == s.text for s in spans)
    assert absent > len(documents)


def test_every_hanzi_of_a_value_is_one_the_demo_tokenizer_spells(documents) -> None:
    values = [v for doc in documents for vs in doc.values().values() for v in vs]
    assert all(char in ov.COMMON_HANZI for value in values for char in HAN.findall(value))


def test_names_are_built_not_drawn_from_fakers_lists(documents) -> None:
    labels = ("乙方", "姓名", "患者姓名", "主治医师", "人物")
    people = [v for doc in documents for label in labels for v in doc.values().get(label, [])]
    assert len(set(people)) > 0.95 * len(people) > 200
    # Faker's given names: 131 of them; ours leave that list for most people.
    faker_given = set(zh_CN.Provider.first_names)
    outside = [p for p in people if p[1:] not in faker_given and p[2:] not in faker_given]
    assert len(outside) > 0.7 * len(people)
    compound = set(ov.surnames()[1])
    assert any(p[:2] in compound for p in people)
    organisations = [v for doc in documents for v in doc.values().get("公司名称", [])]
    assert len(set(organisations)) == len(organisations)


def test_layouts_vary_and_distractors_stand_beside_values(documents) -> None:
    texts = [doc.text for doc in documents]
    for sign in (" | ", "/", "\t", "以下简称", "Name", "：\n"):
        assert any(sign in text for text in texts), sign
    medical = [doc for doc in documents if doc.kind == "medical"]
    # A doctor's and a patient's name in one document, both values: the roles must be read, not guessed.
    both = [d for d in medical if d.values()["患者姓名"] and d.values()["主治医师"]]
    assert len(both) > len(medical) / 2


def test_no_open_template_wording_is_in_the_held_out_layouts_corpus() -> None:
    text = CORPUS.read_text(encoding="utf-8")
    pieces = {p.strip("，。；：（）") for ts in PROSE.values() for t in ts for p in SLOT.split(t)[::2]}
    assert [p for p in pieces if len(p) >= 6 and p in text] == []


def test_same_seed_same_document() -> None:
    a = generate_document("contract", 9, 3, open_vocab=True)
    assert a == generate_document("contract", 9, 3, open_vocab=True)
    assert a.doc_id.startswith("open-contract")
    rng = random.Random(1)
    assert ov.person(rng) != ov.person(rng)
