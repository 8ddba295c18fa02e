"""The answer parser accepts every separator the model may emit, and never splits a real value."""

from __future__ import annotations

import pytest

from model.answers.parse import parse_classification, parse_extraction
from schemas.messages import ReviewCode

SOURCE = "甲方：华信科技有限公司，乙方：王伟、李娜。签约于2024年3月5日。Acme Holdings, Inc. 与 New York Office 见证。"
LABELS = ["甲方", "乙方", "签约日期", "见证方"]


def values(output: str, labels=LABELS, source=SOURCE) -> dict[str, list[str]]:
    answer = parse_extraction(output, labels, source.__contains__)
    return {label: [p.text for p in pieces] for label, pieces in answer.values.items()}


@pytest.mark.parametrize("separator", ["\t", ", ", "，", " ", ","])
def test_each_separator_between_values(separator: str) -> None:
    assert values(f"乙方: 王伟{separator}李娜")["乙方"] == ["王伟", "李娜"]


def test_full_width_colon_after_label() -> None:
    assert values("甲方：华信科技有限公司")["甲方"] == ["华信科技有限公司"]


def test_none_means_no_value() -> None:
    assert values("签约日期: None") == {"签约日期": []}


def test_values_with_spaces_or_commas_that_occur_in_the_source_stay_whole() -> None:
    got = values("见证方: Acme Holdings, Inc.\tNew York Office")
    assert got["见证方"] == ["Acme Holdings, Inc.", "New York Office"]


def test_colon_inside_a_value_is_kept() -> None:
    got = values("签约日期: 10:30", source="会议 10:30 开始")
    assert got["签约日期"] == ["10:30"]


def test_piece_offsets_point_into_the_output() -> None:
    output = "甲方: 华信科技有限公司\n乙方: 王伟\t李娜"
    answer = parse_extraction(output, LABELS, SOURCE.__contains__)
    for pieces in answer.values.values():
        for piece in pieces:
            assert output[piece.start : piece.end] == piece.text


def test_repeated_values_are_reported_once() -> None:
    assert values("乙方: 王伟\t王伟")["乙方"] == ["王伟"]


def test_problems_are_reported_not_swallowed() -> None:
    answer = parse_extraction(
        "甲方: 华信科技有限公司\n丙方: 某人\n甲方: 别的\n没有冒号的一行", LABELS, SOURCE.__contains__
    )
    codes = [code for code, _, _ in answer.problems]
    assert codes == [ReviewCode.UNKNOWN_LABEL, ReviewCode.DUPLICATE_LABEL, ReviewCode.MALFORMED_OUTPUT]
    assert values("甲方: 华信科技有限公司\n丙方: 某人")["甲方"] == ["华信科技有限公司"]


def test_values_not_in_source_are_kept_for_the_validator_to_reject() -> None:
    assert values("甲方: 编造的公司")["甲方"] == ["编造的公司"]


def test_classification_picks_known_labels() -> None:
    answer = parse_classification("体育，财经", ["体育", "财经", "娱乐"])
    assert [p.text for p in answer.values["classes"]] == ["体育", "财经"]
    answer = parse_classification("天气", ["体育", "财经"])
    assert answer.values["classes"] == [] and answer.problems[0][0] is ReviewCode.UNKNOWN_LABEL
