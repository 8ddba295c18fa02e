"""ops/eval/gate.py: the per-corpus table behind the gate's thresholds counts what it says."""

from __future__ import annotations

import json

from model.answers.validate import AlarmedStep, Extraction
from ops.eval.gate import measure, report
from schemas.decode import decode_document
from schemas.messages import Candidate, ReviewCode, ReviewReason, Span, TextWindow

TEXT = "张伟，男，现任职于杭州云栖数智科技有限公司，手机13812345678。"


def _doc(doc_id: str):
    raw = {"doc_id": doc_id, "text": TEXT, "field_set": "resume"}
    return decode_document(json.dumps(raw, ensure_ascii=False).encode(), 1 << 20)


def _span(value: str) -> Span:
    start = TEXT.index(value)
    return Span(text=value, start=start, end=start + len(value), confidence=0.99, margin=0.9)


def test_the_gate_table_counts_routing_codes_alarms_and_picks() -> None:
    truth = {
        d: {"姓名": ["张伟"], "性别": ["男"], "工作单位": ["杭州云栖数智科技有限公司"], "手机号码": ["13812345678"]}
        for d in ("right", "wrong")
    }
    phone = Candidate(
        text="13812345678", start=TEXT.index("138"), end=TEXT.index("138") + 11, score=1.0, source="phone", picked=True
    )
    everything = {"姓名": [_span("张伟")], "性别": [_span("男")], "工作单位": [_span("杭州云栖数智科技有限公司")]}
    # Every value right, the phone a vouched pick: to fields.
    right = Extraction(
        doc_id="right",
        windows=[TextWindow(start=0, end=len(TEXT))],
        fields={**everything, "手机号码": [_span("13812345678")]},
    )
    right.candidates["手机号码"] = [phone]
    # The company cut to 杭州 with an alarm on it, the phone answered None: to review.
    wrong = Extraction(doc_id="wrong", windows=right.windows, fields={**everything, "工作单位": [_span("杭州")]})
    wrong.reasons = [
        ReviewReason(code=ReviewCode.UNCLAIMED_VALUE, detail="", label="手机号码", value="13812345678"),
        ReviewReason(code=ReviewCode.LOW_CONFIDENCE, detail="", label="工作单位", value="杭州"),
        ReviewReason(code=ReviewCode.ENTROPY_ALARM, detail=""),
    ]
    wrong.alarmed = [AlarmedStep(3.1, 0, 12, "工作单位", "杭州"), AlarmedStep(2.9, 0, 20, "手机号码", None)]
    counts = measure([_doc("right"), _doc("wrong")], [right, wrong], truth)
    routing = counts["routing"]
    assert (routing["documents"], routing["to fields"], routing["all right"]) == (2, 1, 1)
    assert (routing["values"], routing["found"]) == (8, 6)
    assert (routing["expected in fields"], routing["wrong or missing in fields"]) == (4, 0)
    assert counts["codes"] == {"unclaimed_value": 1, "low_confidence": 1, "entropy_alarm": 1}
    assert counts["labels"] == {"unclaimed_value 手机号码": 1, "low_confidence 工作单位": 1}
    assert counts["alarms"] == {"value wrong, also low_confidence": 1, "a label's None-or-value step": 1}
    assert dict(counts["picks"]) == {"phone      one candidate fields right": 1}
    assert counts["answers"] == {
        "model's value                            right": 5,
        "backoff pick                             right": 1,
        "model's value + low_confidence           missing": 1,
        "model's None                             missing": 1,
        # The resume's labels the text has no value for, answered None in both records.
        "model's None                             right": 8,
    }
    # One record holds all 4 of its values, the other misses 2 of 4: a perfect gate takes the first only.
    assert routing["ceiling"] == 1
    assert "values found 6/8 (75.0%)" in report("corpus", counts)


def test_the_ceiling_takes_the_records_a_perfect_gate_would_take() -> None:
    from ops.eval.gate import ceiling

    assert ceiling([]) == 0
    # 100 values with one missing is within 2%; the record missing 3 of 5 is not, whatever comes after.
    assert ceiling([(5, 3), (50, 0), (50, 1), (10, 0)]) == 3
    assert ceiling([(10, 1)]) == 0
    assert ceiling([(10, 1), (40, 0)], bar=0.02) == 2
