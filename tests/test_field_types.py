"""Type checks of typed fields: whole values, decode-time prefixes, the ID check digit, the lexicons."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.values.field_types import complete_value, id_card_check_digit, matches, viable_prefix
from model.values.lexicon import organisation_ok, person_ok


@pytest.mark.parametrize(("first17", "check"), [("11010519491231002", "X"), ("44030419900101001", "1")])
def test_check_digit(first17: str, check: str) -> None:
    assert id_card_check_digit(first17) == check


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        ("phone", "13800138000", True),
        ("phone", "１３８００１３８０００", True),
        ("phone", "12800138000", False),
        ("id_card", "11010519491231002x", True),
        ("id_card", "110105194912310021", False),
        ("email", "zhang.san@example.com", True),
        ("email", "zhang@@example.com", False),
        ("person", "欧阳娜娜", True),
        ("person", "王伟", True),
        ("person", "有限公司", False),
        ("organisation", "上海恒达物流有限公司", True),
        ("organisation", "王伟", False),
        ("text", "anything", True),
    ],
)
def test_matches(kind, value: str, ok: bool) -> None:
    assert matches(kind, value) is ok


@given(
    st.from_regex(r"1[3-9][0-9]{9}", fullmatch=True),
    st.sampled_from(["{a} {b} {c}", "{a}-{b}-{c}", "+86 {a}{b}{c}", "0086-{a}{b}{c}", "({a}) {b}{c}"]),
)
def test_every_prefix_of_a_spelled_phone_number_is_viable(mobile: str, spelling: str) -> None:
    value = spelling.format(a=mobile[:3], b=mobile[3:7], c=mobile[7:])
    if matches("phone", value):  # the constraint must never cut off a spelling the normaliser reads
        assert all(viable_prefix("phone", value[:i]) for i in range(len(value) + 1))


@pytest.mark.parametrize("value", ["010-12345678", "(010)1234-5678", "0755 8888 6666转123", "400-810-8888"])
def test_every_prefix_of_a_landline_is_viable(value: str) -> None:
    assert matches("phone", value)
    assert all(viable_prefix("phone", value[:i]) for i in range(len(value) + 1))


@given(st.from_regex(r"[0-9]{17}", fullmatch=True))
def test_every_prefix_of_an_id_number_is_viable(first17: str) -> None:
    value = first17 + id_card_check_digit(first17)
    assert matches("id_card", value)
    assert all(viable_prefix("id_card", value[:i]) for i in range(len(value) + 1))


def test_impossible_prefixes_are_refused() -> None:
    assert not viable_prefix("phone", "138a")
    assert not viable_prefix("phone", "电话")
    assert not viable_prefix("phone", "1" * 33)
    assert not viable_prefix("id_card", "1101A")
    assert not viable_prefix("email", "a@b@")


@pytest.mark.parametrize("name", ["司马光", "诸葛亮", "张伟", "John Smith"])
def test_person_lexicon_accepts_names(name: str) -> None:
    assert person_ok(name)


@pytest.mark.parametrize("name", ["北京大学", "中国工商银行", "华为技术有限公司", "复旦大学附属中山医院"])
def test_organisation_lexicon_accepts_organisations(name: str) -> None:
    assert organisation_ok(name)


PHONE_TEXT = st.text(alphabet="0123456789０１２３+-() .转xX", min_size=1, max_size=24)


@given(value=PHONE_TEXT)
def test_a_complete_phone_is_a_phone_the_normaliser_reads_ending_on_a_digit(value: str) -> None:
    """complete_value's cheap refusals (too few digits) never refuse a phone parse_phone reads."""
    assert complete_value("phone", value) == (value[-1].isalnum() and matches("phone", value))


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        ("phone", "13812345678", True),
        ("phone", "1381234567", False),
        ("phone", "+6581234590", True),
        ("phone", "13812345678 ", False),
        ("phone", "010-1234", False),
        ("email", "xujiayi96@163.com", True),
        ("email", "xujiayi96@", False),
        ("email", "xujiayi96", False),
        ("id_card", "11010119900307851", False),
    ],
)
def test_complete_values(kind, value: str, ok: bool) -> None:
    assert complete_value(kind, value) is ok
