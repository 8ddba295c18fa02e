"""Normal forms of typed values: a table of formats seen in real documents, and properties over random ones."""

from __future__ import annotations

import random
from datetime import date, timedelta

import cn2an
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from model.values.field_types import id_card_check_digit, matches
from model.values.normalize import Mismatch, normalise
from schemas.messages import Normalised

# kind, text as written, (value, end, unit, currency) of its normal form.
FORMATS = [
    ("date", "2024年3月15日", ("2024-03-15", None, None, None)),
    ("date", "2024年3月15号", ("2024-03-15", None, None, None)),
    ("date", "2024/3/15", ("2024-03-15", None, None, None)),
    ("date", "2024-03-15", ("2024-03-15", None, None, None)),
    ("date", "2024.3.15", ("2024-03-15", None, None, None)),
    ("date", "2024.03.15", ("2024-03-15", None, None, None)),
    ("date", "15/03/2024", ("2024-03-15", None, None, None)),
    ("date", "15.03.2024", ("2024-03-15", None, None, None)),
    ("date", "20240315", ("2024-03-15", None, None, None)),
    ("date", "二〇二四年三月十五日", ("2024-03-15", None, None, None)),
    ("date", "贰零贰肆年陆月拾贰日", ("2024-06-12", None, None, None)),
    ("date", "二零二四年十二月三十一日", ("2024-12-31", None, None, None)),
    ("date", "２０２４年３月１５日", ("2024-03-15", None, None, None)),
    ("date", "２０２４／０３／１５", ("2024-03-15", None, None, None)),
    ("date", "2024 年 3 月 15 日", ("2024-03-15", None, None, None)),
    ("date", "2024年3月15日（星期五）", ("2024-03-15", None, None, None)),
    ("date", "March 15, 2024", ("2024-03-15", None, None, None)),
    ("date", "15 March 2024", ("2024-03-15", None, None, None)),
    ("date", "Sept. 3rd, 2024", ("2024-09-03", None, None, None)),
    ("date", "3rd of September, 2024", ("2024-09-03", None, None, None)),
    ("date", "May 2025", ("2025-05", None, None, None)),
    ("date", "2024/02/29", ("2024-02-29", None, None, None)),
    ("date", "2024年3月", ("2024-03", None, None, None)),
    ("date", "2024年3月份", ("2024-03", None, None, None)),
    ("date", "2024.03", ("2024-03", None, None, None)),
    ("date", "2024年", ("2024", None, None, None)),
    ("date", "2024年第一季度", ("2024-01-01", "2024-03-31", None, None)),
    ("date", "2024年一季度", ("2024-01-01", "2024-03-31", None, None)),
    ("date", "2024年Q1", ("2024-01-01", "2024-03-31", None, None)),
    ("date", "2024Q4", ("2024-10-01", "2024-12-31", None, None)),
    ("date", "2024年第2季度", ("2024-04-01", "2024-06-30", None, None)),
    ("date", "2024年上半年", ("2024-01-01", "2024-06-30", None, None)),
    ("date", "2024年下半年", ("2024-07-01", "2024-12-31", None, None)),
    ("date", "2024年3月1日至2025年2月28日", ("2024-03-01", "2025-02-28", None, None)),
    ("date", "2024年3月1日到5月31日", ("2024-03-01", "2024-05-31", None, None)),
    ("date", "2024年3月1日-15日", ("2024-03-01", "2024-03-15", None, None)),
    ("date", "2024-03-01～2024-06-30", ("2024-03-01", "2024-06-30", None, None)),
    ("date", "2024.03-2025.02", ("2024-03", "2025-02", None, None)),
    ("date", "2019年-2023年", ("2019", "2023", None, None)),
    ("date", "2023年9月——2024年1月", ("2023-09", "2024-01", None, None)),
    ("amount", "壹佰万元整", ("1000000", None, None, "CNY")),
    ("amount", "US Dollars Sixty-Two Thousand Four Hundred Only", ("62400", None, None, "USD")),
    ("amount", "Two Hundred and Five Thousand Yuan", ("205000", None, None, "CNY")),
    ("amount", "人民币伍拾万元", ("500000", None, None, "CNY")),
    ("amount", "人民币伍拾贰万元整", ("520000", None, None, "CNY")),
    ("amount", "壹万贰仟叁佰肆拾伍元陆角柒分", ("12345.67", None, None, "CNY")),
    ("amount", "伍佰万圆整", ("5000000", None, None, "CNY")),
    ("amount", "150万元", ("1500000", None, None, "CNY")),
    ("amount", "12.5万", ("125000", None, None, None)),
    ("amount", "1.5亿元", ("150000000", None, None, "CNY")),
    ("amount", "二十万元", ("200000", None, None, "CNY")),
    ("amount", "￥1,234.50", ("1234.5", None, None, "CNY")),
    ("amount", "¥520,000.00", ("520000", None, None, "CNY")),
    ("amount", "５２００００元", ("520000", None, None, "CNY")),
    ("amount", "人民币520000元", ("520000", None, None, "CNY")),
    ("amount", "RMB 5,000", ("5000", None, None, "CNY")),
    ("amount", "USD 3,000", ("3000", None, None, "USD")),
    ("amount", "3,000 USD", ("3000", None, None, "USD")),
    ("amount", "$1.2k", ("1200", None, None, "USD")),
    ("amount", "3000美元", ("3000", None, None, "USD")),
    ("amount", "HK$500", ("500", None, None, "HKD")),
    # A currency's name before the figure, 元 its unit (a contract's 大写 in dollars)
    ("amount", "美元肆万伍仟元整", ("45000", None, None, "USD")),
    ("amount", "港币3000元", ("3000", None, None, "HKD")),
    ("amount", "€20", ("20", None, None, "EUR")),
    ("amount", "500块钱", ("500", None, None, "CNY")),
    ("amount", "5000元/月", ("5000", None, "month", "CNY")),
    ("amount", "月薪8千-1.2万", ("8000", "12000", "month", None)),
    ("amount", "年薪30-50万", ("300000", "500000", "year", None)),
    ("amount", "8-12k", ("8000", "12000", None, None)),
    ("amount", "8000-1.2万元", ("8000", "12000", None, "CNY")),
    ("amount", "15000-22500元/月", ("15000", "22500", "month", "CNY")),
    ("amount", "1,000-2,000元", ("1000", "2000", None, "CNY")),
    ("amount", "零元整", ("0", None, None, "CNY")),
    # A salary is a range with its period: one amount is a range of one, `以上` leaves the top open.
    ("salary", "19000-28500元/月", ("19000", "28500", "month", "CNY")),
    ("salary", "年薪40-60万", ("400000", "600000", "year", None)),
    ("salary", "15k-25k·13薪", ("15000", "25000", "month", None)),
    ("salary", "8000元以上", ("8000", None, None, "CNY")),
    ("salary", "8k起", ("8000", None, None, None)),
    ("salary", "12-30K", ("12000", "30000", None, None)),
    ("salary", "月薪8千-1.2万", ("8000", "12000", "month", None)),
    ("salary", "5000元/月", ("5000", "5000", "month", "CNY")),
    ("salary", "２００-３００元/天", ("200", "300", "day", "CNY")),
    ("salary", "20k-35k RMB/month", ("20000", "35000", "month", "CNY")),
    ("phone", "13800138000", ("+8613800138000", None, None, None)),
    ("phone", "138 0013 8000", ("+8613800138000", None, None, None)),
    ("phone", "138-0013-8000", ("+8613800138000", None, None, None)),
    ("phone", "+86 138 0013 8000", ("+8613800138000", None, None, None)),
    ("phone", "0086 13800138000", ("+8613800138000", None, None, None)),
    ("phone", "１３８００１３８０００", ("+8613800138000", None, None, None)),
    ("phone", "010-12345678", ("+86-10-12345678", None, None, None)),
    ("phone", "(010) 1234 5678", ("+86-10-12345678", None, None, None)),
    ("phone", "+86 10 12345678", ("+86-10-12345678", None, None, None)),
    ("phone", "（0755）88888888", ("+86-755-88888888", None, None, None)),
    ("phone", "021-6123456", ("+86-21-6123456", None, None, None)),
    ("phone", "010-12345678转8001", ("+86-10-12345678;ext=8001", None, None, None)),
    ("phone", "400-810-8888", ("+86-400-8108888", None, None, None)),
    ("phone", "+65 8123 4590", ("+6581234590", None, None, None)),
    ("phone", "+44 20 7946 0958", ("+442079460958", None, None, None)),
    ("id_card", "11010519491231002x", ("11010519491231002X", None, None, None)),
    ("id_card", "110105 19491231 002X", ("11010519491231002X", None, None, None)),
    ("id_card", "４４０３０４１９９００１０１００１１", ("440304199001010011", None, None, None)),
    ("email", "Zhang.San@Example.COM", ("Zhang.San@example.com", None, None, None)),
    ("email", "ｌｉ＠ｅｘａｍｐｌｅ．ｃｎ", ("li@example.cn", None, None, None)),
]

NOT_OF_THEIR_TYPE = [
    ("date", "Mayday 12, 2025"),
    ("date", "February 30, 2024"),
    ("date", "2024年2月30日"),
    ("date", "2023/02/29"),
    ("date", "2024-13-01"),
    ("date", "03/15/2024"),
    ("date", "3月15日"),
    ("date", "2025年1月1日至2024年1月1日"),
    ("date", "下周一"),
    ("date", ""),
    ("date", "0000Q1"),
    ("date", "0000年上半年"),
    ("date", "2024-" * 40 + "2024"),
    ("amount", "面议"),
    ("amount", "¥100美元"),
    ("amount", "20000-10000元"),
    ("amount", "15k-25k·13薪"),
    ("amount", ""),
    ("amount", "壹" * 100),
    ("salary", "待遇优厚"),
    ("salary", "8000-1.2万以上"),
    ("salary", "20000-10000元/月"),
    ("phone", "12800138000"),
    ("phone", "1380013800"),
    ("phone", "+65 2025"),
    ("amount", "Sixty-Two Thousand"),  # no currency
    ("amount", "Dollars Twenty Twenty"),
    ("phone", "010-0234567"),
    ("phone", "电话"),
    ("id_card", "110105194912310021"),
    ("id_card", "11010519491231002"),
    ("id_card", "11010519491231002Y"),
    ("email", "zhang@@example.com"),
    ("person", "有限公司"),
    ("organisation", "王伟"),
]


@pytest.mark.parametrize(("kind", "text", "expected"), FORMATS, ids=[f"{k}:{t}" for k, t, _ in FORMATS])
def test_real_world_formats_normalise(kind, text: str, expected: tuple) -> None:
    outcome = normalise(kind, text)
    assert isinstance(outcome, Normalised), outcome
    assert outcome.kind == kind
    assert (outcome.value, outcome.end, outcome.unit, outcome.currency) == expected
    assert matches(kind, text)


@pytest.mark.parametrize(("kind", "text"), NOT_OF_THEIR_TYPE, ids=[f"{k}:{t}" for k, t in NOT_OF_THEIR_TYPE])
def test_values_not_of_their_type_are_mismatches_with_a_reason(kind, text: str) -> None:
    outcome = normalise(kind, text)
    assert isinstance(outcome, Mismatch) and outcome.reason
    assert not matches(kind, text)


def test_a_wrong_id_check_digit_names_the_right_one() -> None:
    outcome = normalise("id_card", "110105194912310021")
    assert isinstance(outcome, Mismatch) and "X" in outcome.reason


def test_a_first_generation_id_number_is_refused_as_such() -> None:
    outcome = normalise("id_card", "110105491231002")
    assert isinstance(outcome, Mismatch) and "15-digit" in outcome.reason


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("text", "任何内容"),
        ("person", "王伟"),
        ("organisation", "北京大学"),
        ("salary", "面议"),
        ("salary", "薪资面议"),
    ],
)
def test_types_without_a_normal_form_give_none(kind, text: str) -> None:
    # A negotiable salary is a salary (no mismatch, no review) that names no amount.
    assert normalise(kind, text) is None
    assert matches(kind, text)


def _date_formats(day: date) -> list[str]:
    y, m, d = day.year, day.month, day.day
    cn_year = "".join("〇一二三四五六七八九"[int(c)] for c in str(y))
    wide = str.maketrans("0123456789", "０１２３４５６７８９")
    return [
        f"{y}年{m}月{d}日",
        f"{y}-{m:02d}-{d:02d}",
        f"{y}/{m}/{d}",
        f"{y}.{m:02d}.{d:02d}",
        f"{d:02d}/{m:02d}/{y}",
        f"{y}{m:02d}{d:02d}",
        f"{cn_year}年{cn2an.an2cn(m)}月{cn2an.an2cn(d)}日",
        f"{y}年{m}月{d}日".translate(wide),
        f"{y} 年 {m} 月 {d} 号",
    ]


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)), st.randoms(use_true_random=False))
def test_random_dates_in_random_formats_round_trip(day: date, rng: random.Random) -> None:
    text = rng.choice(_date_formats(day))
    outcome = normalise("date", text)
    assert isinstance(outcome, Normalised) and (outcome.value, outcome.end) == (day.isoformat(), None), text


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2098, 1, 1)), st.integers(0, 700))
def test_random_date_ranges_round_trip(start: date, days: int) -> None:
    end = start + timedelta(days=days)
    text = f"{start.year}年{start.month}月{start.day}日至{end.year}年{end.month}月{end.day}日"
    outcome = normalise("date", text)
    assert isinstance(outcome, Normalised) and (outcome.value, outcome.end) == (start.isoformat(), end.isoformat())


@given(
    st.one_of(
        st.dates().map(date.isoformat),
        st.dates().map(lambda d: d.isoformat()[:7]),
        st.dates().map(lambda d: f"{d.year:04d}"),
    )
)
def test_normalising_iso_output_again_changes_nothing(iso: str) -> None:
    outcome = normalise("date", iso)
    assert isinstance(outcome, Normalised) and outcome.value == iso


@given(st.sampled_from([text for kind, text, _ in FORMATS]), st.sampled_from(["date", "amount", "phone", "id_card"]))
def test_normal_forms_are_fixed_points(text: str, kind) -> None:
    first = normalise(kind, text)
    if not isinstance(first, Normalised):
        return
    for part in filter(None, (first.value, first.end)):
        again = normalise(kind, part)
        assert isinstance(again, Normalised) and again.value == part, (text, part)


@given(st.integers(min_value=1, max_value=10**12 - 1))
def test_amounts_in_financial_numerals_parse_back(n: int) -> None:
    # cn2an leaves out the 零 of an empty 万 group before a thousands digit (200,001,000 comes out as
    # 贰亿壹仟, which reads as 2.1亿 too): the normaliser rightly refuses that, so it is not drawn.
    assume(not (n >= 10**8 and n // 10**4 % 10**4 == 0 and n % 10**4 >= 1000))
    written = cn2an.an2cn(n, "up")
    for text in (written, written + "元整", "人民币" + written + "元"):
        outcome = normalise("amount", text)
        assert isinstance(outcome, Normalised) and outcome.value == str(n), text


@given(
    st.integers(min_value=0, max_value=10**9), st.sampled_from(["¥{:,}", "RMB {:,}", "{}元", "人民币{}元", "USD {:,}"])
)
def test_amounts_in_digits_parse_back(n: int, template: str) -> None:
    outcome = normalise("amount", template.format(n))
    assert isinstance(outcome, Normalised) and outcome.value == str(n)


@given(st.from_regex(r"[0-9]{17}", fullmatch=True))
def test_valid_id_numbers_normalise_to_upper_case(first17: str) -> None:
    number = first17 + id_card_check_digit(first17)
    outcome = normalise("id_card", number.lower())
    assert isinstance(outcome, Normalised) and outcome.value == number


MOBILE_SPELLINGS = [
    lambda n: n,
    lambda n: f"+86 {n}",
    lambda n: f"0086{n}",
    lambda n: f"{n[:3]}-{n[3:7]}-{n[7:]}",
    lambda n: f"+86 {n[:3]} {n[3:7]} {n[7:]}",
]


@given(st.from_regex(r"1[3-9][0-9]{9}", fullmatch=True), st.sampled_from(MOBILE_SPELLINGS))
def test_mobiles_in_any_spelling_normalise_alike(number: str, spell) -> None:
    outcome = normalise("phone", spell(number))
    assert isinstance(outcome, Normalised) and outcome.value == "+86" + number


@given(st.text(max_size=40), st.sampled_from(["date", "amount", "phone", "id_card", "email", "person", "organisation"]))
def test_arbitrary_text_never_raises(text: str, kind) -> None:
    outcome = normalise(kind, text)
    assert outcome is None or isinstance(outcome, Normalised | Mismatch)


# Pieces of dates, amounts and phones, including the awkward ones (year 0000, 廿, 〇十〇-like runs),
# so random joins land near the formats far more often than random text does.
PIECES = [
    *["0000", "0001", "2024", "1", "0", "02", "12", "13", "29", "31", "32", "二〇二四", "十二", "三十一", "〇", "廿"],
    *["年", "月", "日", "号", "季度", "第", "Q", "上半年", "至", "-", "/", ".", "~", "——", "(周日)"],
    *["k", "万", "亿", "元", "整", "¥", "$", "USD", "壹", "佰", "角", "分", "点", "月薪", "/月", "+86", "转", "X", " "],
]


@given(st.lists(st.sampled_from(PIECES), max_size=9).map("".join), st.sampled_from(["date", "amount", "phone"]))
def test_joined_pieces_never_raise_and_normal_forms_are_fixed_points(text: str, kind) -> None:
    outcome = normalise(kind, text)
    assert isinstance(outcome, Normalised | Mismatch)
    if isinstance(outcome, Normalised):
        for part in filter(None, (outcome.value, outcome.end)):
            again = normalise(kind, part)
            assert isinstance(again, Normalised) and again.value == part, (text, outcome)
