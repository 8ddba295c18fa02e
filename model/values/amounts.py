"""Money as documents write it (大写 numerals, 万 and k multipliers, ¥/RMB/USD markers, salary ranges), as decimals."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import NamedTuple

from model.values.numerals import chinese_number
from model.values.width import fold_width

_CURRENCY_PREFIX = re.compile(
    r"^(人民币|美元|美金|港元|港币|欧元|日元|英镑|RMB|CNY|US\$|USD|HK\$|HKD|EUR|GBP|JPY|¥|\$|€|£)", re.IGNORECASE
)
# 元 after a figure is the unit of any currency named before it (美元肆万伍仟元整 is 45,000 dollars).
_UNIT_WORDS = frozenset({"元", "圆"})
_CURRENCY_SUFFIX = re.compile(
    r"(人民币|美元|美金|欧元|港元|港币|日元|英镑|元|圆|块钱|块|RMB|CNY|USD|HKD|EUR|GBP|JPY)$", re.IGNORECASE
)
_CURRENCIES = {
    "人民币": "CNY", "rmb": "CNY", "cny": "CNY", "¥": "CNY", "元": "CNY", "圆": "CNY", "块钱": "CNY", "块": "CNY",
    "us$": "USD", "usd": "USD", "$": "USD", "美元": "USD", "美金": "USD",
    "hk$": "HKD", "hkd": "HKD", "港元": "HKD", "港币": "HKD",
    "eur": "EUR", "€": "EUR", "欧元": "EUR",
    "gbp": "GBP", "£": "GBP", "英镑": "GBP",
    "jpy": "JPY", "日元": "JPY",
}  # fmt: skip
_PERIOD_PREFIX = re.compile(r"^(月|年|日|时)薪")
_PERIOD_SUFFIX = re.compile(r"(?:/|每|一)(月|年|天|日|小时|时)$")
_PERIODS = {"月": "month", "年": "year", "天": "day", "日": "day", "小时": "hour", "时": "hour"}
# A 大写 amount ends in 整 (or 正) to show nothing was left off; it carries no value.
_COMPLETE = re.compile(r"[整正]$")
_RANGE_SEP = re.compile(r"-|~|至|到|—+")
_DIGITS = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<x>百万|千万|万亿|亿|万|千|百|[kKwW])?")
_MULTIPLIERS = {
    "百": 100, "千": 1000, "k": 1000, "万": 10**4, "w": 10**4,
    "百万": 10**6, "千万": 10**7, "亿": 10**8, "万亿": 10**12,
}  # fmt: skip
# 大写 and 小写 numerals, with the 元角分 that cn2an reads itself.
_CHINESE = re.compile(r"[〇零一二三四五六七八九十百千万亿两壹贰叁肆伍陆柒捌玖拾佰仟元圆角分点]+")
# Far above any written amount (壹仟贰佰叁拾肆万伍仟陆佰柒拾捌元玖角玖分 is 20); keeps cn2an off hostile spans.
MAX_CHARS = 64


# A sum in English words, as contracts write it beside or instead of the figure: US Dollars Sixty-Two
# Thousand Four Hundred Only. A currency is needed, before or after the words, as for any amount.
_EN_UNITS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)  # fmt: skip
_EN_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_EN_VALUES = {**{w: i for i, w in enumerate(_EN_UNITS)}, **{w: 10 * (i + 2) for i, w in enumerate(_EN_TENS)}}
_EN_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
ENGLISH_NUMBER_WORD = "|".join(sorted([*_EN_VALUES, "hundred", *_EN_SCALES], key=len, reverse=True))
ENGLISH_CURRENCY = r"US Dollars|U\.S\. Dollars|Hong Kong Dollars|Dollars|Renminbi|Yuan|Euros?|Pounds Sterling|Pounds"
_EN_CURRENCIES = {
    "us dollars": "USD", "u.s. dollars": "USD", "dollars": "USD", "hong kong dollars": "HKD", "renminbi": "CNY",
    "yuan": "CNY", "euro": "EUR", "euros": "EUR", "pounds sterling": "GBP", "pounds": "GBP",
}  # fmt: skip
_EN_WORDS = rf"(?:{ENGLISH_NUMBER_WORD})(?:[\s-]+(?:and\s+)?(?:{ENGLISH_NUMBER_WORD}))*"
# Before the words a currency's code may stand too (USD Five Thousand); after them, only its name.
_EN_BEFORE = rf"{ENGLISH_CURRENCY}|USD|RMB|CNY|EUR|GBP|HKD"
# As a text writes one (model/values/mentions.py): a currency before the words or after them.
ENGLISH_AMOUNT = (
    rf"(?:{_EN_BEFORE})\s+{_EN_WORDS}(?:\s+only)?"
    rf"|{_EN_WORDS}\s+(?:{ENGLISH_CURRENCY})(?:\s+only)?"
)
_ENGLISH_AMOUNT = re.compile(
    rf"(?:(?P<pre>{_EN_BEFORE})\s+)?(?P<words>{_EN_WORDS})"
    rf"(?:\s+(?P<post>{ENGLISH_CURRENCY}))?(?:\s+only)?\.?",
    re.IGNORECASE,
)


def _english_amount(text: str) -> Amount | None:
    found = _ENGLISH_AMOUNT.fullmatch(" ".join(text.split()))
    if found is None or not (found["pre"] or found["post"]):
        return None
    marker = (found["pre"] or found["post"]).lower()
    currency = _EN_CURRENCIES.get(marker) or _CURRENCIES.get(marker)
    total = current = 0
    for word in re.split(r"[\s-]+", found["words"].lower().strip()):
        if word == "and":
            continue
        if word == "hundred":
            if not current:
                return None
            current *= 100
        elif word in _EN_SCALES:
            total, current = total + current * _EN_SCALES[word], 0
        else:
            value = _EN_VALUES[word]
            if current % 100 and (value >= 10 or current % 10):
                return None  # twenty twenty, one two: no number
            current += value
    return Amount(Decimal(total + current), None, None, currency)


class Amount(NamedTuple):
    value: Decimal
    end: Decimal | None
    unit: str | None
    currency: str | None


def parse_amount(text: str) -> Amount | None:
    """The amount or range of amounts the text names, in whole currency units; None when it names none."""
    if len(text) > MAX_CHARS:
        return None
    if text[:1].isascii() and text[:1].isalpha() and (english := _english_amount(text)) is not None:
        return english
    body = "".join(fold_width(text).split()).replace(",", "")
    unit = None
    if found := _PERIOD_PREFIX.search(body):
        unit, body = _PERIODS[found[1]], body[found.end() :]
    if found := _PERIOD_SUFFIX.search(body):
        unit, body = _PERIODS[found[1]], body[: found.start()]
    currencies: set[str] = set()
    numbers: list[tuple[Decimal, str | None]] = []
    for side in _split(body):
        marked = _currency(side)
        number = _number(marked[0]) if marked is not None else None
        if marked is None or number is None:
            return None
        currencies |= {marked[1]} if marked[1] else set()
        numbers.append(number)
    if len(currencies) > 1:
        return None
    currency = next(iter(currencies), None)
    (low, low_scaled), *rest = numbers
    if not rest:
        return Amount(low, None, unit, currency)
    [(high, high_scaled)] = rest
    # `8-12k` and `30-50万` write the multiplier once, after the second number; `8000-1.2万` does not,
    # which shows as the carried multiplier putting the low end above the high one.
    if not low_scaled and high_scaled and low * _MULTIPLIERS[high_scaled] <= high:
        low *= _MULTIPLIERS[high_scaled]
    return Amount(low, high, unit, currency) if low <= high else None


def plain(value: Decimal) -> str:
    """A decimal without exponent or trailing zeros, so equal amounts have one spelling."""
    return format(value.normalize(), "f")


def _split(body: str) -> list[str]:
    found = _RANGE_SEP.search(body)
    if found is None:
        return [body]
    return [body[: found.start()], body[found.end() :]]


def _currency(side: str) -> tuple[str, str | None] | None:
    """The side without its currency markers, and the currency; None when two markers disagree."""
    currency = None
    if found := _CURRENCY_PREFIX.search(side):
        currency, side = _CURRENCIES[found[1].lower()], side[found.end() :]
    side = _COMPLETE.sub("", side)
    if found := _CURRENCY_SUFFIX.search(side):
        suffix = _CURRENCIES[found[1].lower()]
        if currency not in (None, suffix) and found[1] not in _UNIT_WORDS:
            return None
        currency, side = currency or suffix, side[: found.start()]
    if _CHINESE.fullmatch(side) and re.search("[元圆角分]", side):
        currency = currency or "CNY"
    return side, currency


def _number(side: str) -> tuple[Decimal, str | None] | None:
    """The side's value and the multiplier it was written with (None when written out in full)."""
    if found := _DIGITS.fullmatch(side):
        multiplier = (found["x"] or "").lower() or None
        return Decimal(found["n"]) * (_MULTIPLIERS[multiplier] if multiplier else 1), multiplier
    if not _CHINESE.fullmatch(side):
        return None
    value = chinese_number(side)
    return (value, None) if value is not None else None
