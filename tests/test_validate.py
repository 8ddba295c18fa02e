"""Grounding and gating of generated answers, on answers spelled with the tiny model's real tokenizer."""

from __future__ import annotations

import itertools
import random

import pytest
from transformers import AutoTokenizer

from model.answers.parse import Piece
from model.answers.validate import interpret, piece_steps
from model.config import EngineSettings
from model.signals import Generation
from schemas.messages import Document, ReviewCode

TEXT = "劳动合同摘要。甲方：上海恒达物流有限公司，乙方：王伟。双方于2024年3月5日签订本合同。"
SETTINGS = EngineSettings(path="unused", max_new_tokens=64)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def generation(tokenizer, answer: str, prob: float = 0.99, entropy: float = 0.1, finished: bool = True) -> Generation:
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + ([tokenizer.eos_token_id] if finished else [])
    return Generation(
        token_ids=ids,
        probs=[prob] * len(ids),
        entropies=[entropy] * len(ids),
        top_ids=[[i, 5, 6] for i in ids],
        top_probs=[[prob, 0.005, 0.001] for _ in ids],
        finished=finished,
    )


def run(tokenizer, answer: str, labels=("甲方", "乙方", "签约日期"), field_types=None, **kwargs):
    doc = Document(doc_id="d", text=TEXT, task="extract", labels=tuple(labels), field_types=field_types or {})
    decode = lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True)  # noqa: E731
    return interpret(doc, [tuple(labels)], [generation(tokenizer, answer, **kwargs)], decode, SETTINGS, truncated=False)


def test_grounded_confident_answer_is_validated_with_offsets(tokenizer) -> None:
    result = run(tokenizer, "甲方: 上海恒达物流有限公司\n乙方: 王伟\n签约日期: 2024年3月5日")
    assert not result.needs_review, result.reasons
    for spans in result.fields.values():
        for span in spans:
            assert TEXT[span.start : span.end] == span.text
            assert span.confidence == pytest.approx(0.99)
    assert [s.text for s in result.fields["甲方"]] == ["上海恒达物流有限公司"]


def test_invented_value_never_becomes_a_field(tokenizer) -> None:
    result = run(tokenizer, "甲方: 北京编造科技有限公司\n乙方: 王伟\n签约日期: None")
    assert result.fields["甲方"] == []
    reason = next(r for r in result.reasons if r.code is ReviewCode.NOT_IN_SOURCE)
    assert (reason.label, reason.value) == ("甲方", "北京编造科技有限公司")


def test_low_confidence_goes_to_review(tokenizer) -> None:
    result = run(tokenizer, "甲方: 上海恒达物流有限公司\n乙方: 王伟\n签约日期: None", prob=0.5)
    assert {r.code for r in result.reasons} == {ReviewCode.LOW_CONFIDENCE}
    assert result.fields["乙方"][0].confidence == pytest.approx(0.5)


def test_flat_distribution_raises_an_entropy_alarm_naming_the_step(tokenizer) -> None:
    result = run(tokenizer, "甲方: None\n乙方: None\n签约日期: None", entropy=3.0)
    assert ReviewCode.ENTROPY_ALARM in {r.code for r in result.reasons}
    # Every step is flat, but only the three that chose None over a value decided anything.
    assert result.alarmed_steps == 3
    assert [(a.label, a.value) for a in result.alarmed] == [("甲方", None), ("乙方", None), ("签约日期", None)]
    assert [a.chosen.text for a in result.alarms] == ["N", "N", "N"]
    first = result.alarms[0]
    assert first.entropy_nats == 3.0 and first.threshold == SETTINGS.entropy_threshold
    assert first.chosen.prob == pytest.approx(0.99) and len(first.alternatives) == 2


@pytest.mark.parametrize(("least", "alarms"), [(1, True), (3, True), (4, False)])
def test_a_record_alarms_once_enough_deciding_steps_are_unsure(tokenizer, least: int, alarms: bool) -> None:
    labels = ("甲方", "乙方", "签约日期")
    doc = Document(doc_id="d", text=TEXT, task="extract", labels=labels)
    decode = lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True)  # noqa: E731
    flat = generation(tokenizer, "甲方: None\n乙方: None\n签约日期: None", entropy=3.0)
    settings = EngineSettings(path="unused", max_new_tokens=64, entropy_alarm_steps=least)
    result = interpret(doc, [labels], [flat], decode, settings, truncated=False)
    assert result.alarmed_steps == 3  # counted either way
    assert (ReviewCode.ENTROPY_ALARM in {r.code for r in result.reasons}) is alarms
    assert bool(result.alarms) is alarms


def test_alarms_come_only_from_a_label_s_decision_and_the_tokens_of_kept_values(tokenizer) -> None:
    """Flat at every step: the label heads, `: ` and the invented value decide nothing in the record."""
    answer = "甲方: 北京编造科技有限公司\n乙方: 王伟\n签约日期: None"
    result = run(tokenizer, answer, entropy=3.0)
    [trace] = result.traces
    steps = {(a.label, a.value): [] for a in result.alarmed}
    for a in result.alarmed:
        steps[a.label, a.value].append(trace.token_texts[a.step])
    # 甲方's value is not in the text (never a field): only its decision counts, the token that began it;
    # 乙方's value counts whole, with the line end that closed it; 签约日期's None at its first token.
    assert steps == {("甲方", None): ["北京"], ("乙方", "王伟"): ["王伟", "\n"], ("签约日期", None): ["N"]}
    counted = {a.step for a in result.alarmed}
    heads = [i for i, text in enumerate(trace.token_texts) if text and text in "甲方乙方签约日期: "]
    assert heads and not counted & set(heads), "a label head or separator raised an alarm"
    assert result.alarmed_steps == len(counted) < len(trace.generation.token_ids)


def test_missing_label_and_unfinished_output_are_flagged(tokenizer) -> None:
    result = run(tokenizer, "甲方: 上海恒达物流有限公司", finished=False)
    codes = [(r.code, r.label) for r in result.reasons]
    assert (ReviewCode.INCOMPLETE_OUTPUT, "乙方") in codes and (ReviewCode.INCOMPLETE_OUTPUT, None) in codes


def test_typed_values_carry_their_normal_form_and_untyped_ones_none(tokenizer) -> None:
    answer = "甲方: 上海恒达物流有限公司\n乙方: 王伟\n签约日期: 2024年3月5日"
    result = run(tokenizer, answer, field_types={"签约日期": "date", "乙方": "person"})
    assert not result.needs_review, result.reasons
    [signed] = result.fields["签约日期"]
    assert (signed.text, TEXT[signed.start : signed.end]) == ("2024年3月5日", "2024年3月5日")
    assert signed.normalised is not None and (signed.normalised.kind, signed.normalised.value) == ("date", "2024-03-05")
    assert result.fields["乙方"][0].normalised is None and result.fields["甲方"][0].normalised is None


def test_a_value_that_is_not_of_its_type_goes_to_review_but_stays_grounded(tokenizer) -> None:
    answer = "甲方: 上海恒达物流有限公司\n乙方: 王伟\n签约日期: 王伟"
    result = run(tokenizer, answer, field_types={"签约日期": "date"})
    [reason] = result.reasons
    assert (reason.code, reason.label, reason.value) == (ReviewCode.TYPE_MISMATCH, "签约日期", "王伟")
    assert "date" in reason.detail
    assert [(s.text, s.normalised) for s in result.fields["签约日期"]] == [("王伟", None)]


def test_a_name_cut_inside_its_word_stays_for_the_reviewer_with_its_reason(tokenizer) -> None:
    result = run(tokenizer, "甲方: 恒达物流有限公司\n乙方: 王\n签约日期: 2024年3月5日")
    cut = {(r.code, r.label, r.value) for r in result.reasons}
    # 恒达物流有限公司 is a word-edge cut of 上海恒达物流有限公司 (上海/恒达): a company without its
    # city is no cut jieba can see; 王 is only the surname of 王伟.
    assert cut == {(ReviewCode.VALUE_BOUNDARY, "乙方", "王")}
    assert [s.text for s in result.fields["乙方"]] == ["王"]
    whole = run(tokenizer, "甲方: 上海恒达物流有限公司\n乙方: 王伟\n签约日期: 2024年3月5日")
    assert not whole.needs_review, whole.reasons


def test_a_date_in_the_text_that_its_typed_label_left_out_goes_to_review(tokenizer) -> None:
    answer = "甲方: 上海恒达物流有限公司\n乙方: 王伟\n签约日期: None"
    result = run(tokenizer, answer, field_types={"签约日期": "date"})
    [reason] = result.reasons
    assert (reason.code, reason.label, reason.value) == (ReviewCode.UNCLAIMED_VALUE, "签约日期", "2024年3月5日")
    # Untyped, the label's None is the model's word: nothing says which label the date belongs to.
    assert not run(tokenizer, answer).needs_review


def test_piece_steps_are_the_steps_whose_characters_meet_the_piece() -> None:
    """Bisection against the plain definition, on random answers (tokens of zero or more characters)."""
    rng = random.Random(7)
    for _ in range(2000):
        ends = list(itertools.accumulate(rng.choice([0, 1, 1, 2, 3]) for _ in range(rng.randint(0, 12))))
        total = ends[-1] if ends else 0
        start = rng.randint(0, total + 1)
        piece = Piece("", start, rng.randint(start, total + 2))
        plain = [
            step for step, (a, b) in enumerate(zip([0, *ends], ends, strict=False)) if a < piece.end and b > piece.start
        ]
        assert piece_steps(piece, ends) == plain, (piece, ends)
