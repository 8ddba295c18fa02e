"""The demo model's training stream: the same batch for the same step, and prompts that teach
`None` (absent, dropped and foreign labels, fragments) in several label orders."""

from __future__ import annotations

import random

import pytest

from model.answers.parse import NO_VALUE
from ops.corpus import KINDS, generate_document
from ops.train.demo_data import UNHELD_LABELS, DataMix, DocumentStream, asked_labels, fragment
from ops.train.demo_model import DEMO_PLAN, tokenizer_texts
from ops.train.recipe import make_tokenizer
from schemas.field_sets import FIELD_SETS


@pytest.fixture(scope="module")
def stream() -> DocumentStream:
    tokenizer = make_tokenizer(DEMO_PLAN.recipe, tokenizer_texts(1, 40))
    return DocumentStream(tokenizer, DEMO_PLAN, seed=1)


def test_a_step_is_the_same_batch_whoever_asks(stream: DocumentStream) -> None:
    assert stream(7) == stream(7)
    assert stream(7) != stream(8)


def test_batches_teach_none_and_copying_in_varied_label_orders(stream: DocumentStream) -> None:
    tokenizer = stream.tokenizer
    answers, orders = [], set()
    for step in range(3000, 3012):
        for row in stream(step):
            prompt, answer = tokenizer.decode(row.prompt), tokenizer.decode(row.answer, skip_special_tokens=True)
            text = prompt.split("\n抽取: ")[0].removeprefix("输入: ")
            for line in answer.split("\n"):
                label, value = line.split(": ", 1)
                assert value == NO_VALUE or all(v in text for v in value.split("\t")), (label, value)
                answers.append((label, value))
            orders.add(prompt.rsplit("抽取: ", 1)[1].split("\n")[0])
    nones = [label for label, value in answers if value == NO_VALUE]
    assert 0.2 < len(nones) / len(answers) < 0.8
    assert any(label in UNHELD_LABELS for label in nones)
    assert len(orders) > 20


def test_foreign_labels_and_shuffles_come_from_the_mix() -> None:
    rng = random.Random(0)
    asked = [asked_labels("contract", rng, DataMix()) for _ in range(200)]
    assert any(tuple(labels) == FIELD_SETS["contract"] for labels in asked)
    assert any(set(labels) - set(FIELD_SETS["contract"]) for labels in asked)
    assert any(sorted(labels) == sorted(FIELD_SETS["contract"]) != labels for labels in asked)


def test_a_fragment_keeps_only_the_values_wholly_inside_it() -> None:
    doc = generate_document("contract", 3, 0, long=True, chars=4000)
    rng = random.Random(1)
    for _ in range(50):
        text, values = fragment(doc, rng, 600)
        assert len(text) <= 600 and text in doc.text
        assert all(v in text for vs in values.values() for v in vs)


def test_free_documents_hold_their_values_at_their_offsets() -> None:
    missing = 0
    for index in range(100):
        kind = sorted(KINDS)[index % 5]
        doc = generate_document(kind, 4, index, free=True, brief=index % 2 == 0)
        assert tuple(doc.truth) == FIELD_SETS[kind]
        for spans in doc.truth.values():
            missing += not spans
            assert all(doc.text[s.start : s.end] == s.text for s in spans)
    assert missing > 50
