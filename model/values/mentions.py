"""Typed values written in a free text: phones, e-mails, dates, amounts and organisations, as the type checks read them.

Each pattern is generous (it finds what looks like a value of the type), and a mention counts only
when the type's own reader (`model/values/field_types.py:matches`) accepts it: the same judgement
that decides whether a label's value is of its type. Amounts need a currency or 元 (a bare number
is no amount), dates a year or a month with a day.
"""

from __future__ import annotations

import functools
import re

from model.values.field_types import EMAIL, matches
from schemas.field_sets import FieldType

D = "[0-9０-９]"
CN = "[〇零一二三四五六七八九十两]"
BIG = "[零壹贰叁肆伍陆柒捌玖拾佰仟万亿一二三四五六七八九十百千两]"
_PATTERNS: dict[FieldType, re.Pattern[str]] = {
    "phone": re.compile(
        rf"(?<![0-9０-９])(?:(?:\+|00)?86[- ]?)?"
        rf"(?:1[3-9]{D}(?:[- ]?{D}){{8}}|0{D}{{2,3}}[- ]?{D}{{7,8}}|[48]00[- ]?{D}{{3}}[- ]?{D}{{4}})(?![0-9０-９])"
    ),
    "email": EMAIL,
    "date": re.compile(
        rf"{D}{{4}}(?:年{D}{{1,2}}月(?:{D}{{1,2}}[日号])?|(?P<sep>[-/.]){D}{{1,2}}(?P=sep){D}{{1,2}})"
        rf"|{CN}{{4}}年{CN}{{1,2}}月(?:{CN}{{1,3}}[日号])?"
    ),
    "amount": re.compile(
        rf"(?:人民币|RMB|CNY|[¥￥$])\s?{D}[0-9０-９,，]*(?:\.{D}+)?(?:百万|千万|亿|万|千)?元?"
        rf"|{D}[0-9０-９,]*(?:\.{D}+)?(?:百万|千万|亿|万|千)?元"
        rf"|(?:人民币)?{BIG}+元整?"
    ),
}
# A run of name characters ending in an organisation's suffix; the lexicon confirms the suffix. Words
# that begin a clause (于, 在, 从, 与, 的 ...) are left out so the mention starts near the name. A
# bare 公司 is left out too: "具体内容以公司公告为准" names no company (generated news says so).
_ORG_CHARS = r"[^\W\d_于在从与和及的是为了年月日到去带住向由]"
_PATTERNS["organisation"] = re.compile(
    rf"{_ORG_CHARS}{{2,24}}?(?:有限责任公司|股份有限公司|有限公司|集团|医院|大学|学院|研究院|研究所|学校|中学|事务所|银行)"
)
MENTIONED_TYPES: tuple[FieldType, ...] = tuple(_PATTERNS)


@functools.lru_cache(maxsize=256)
def mentions(text: str) -> dict[FieldType, tuple[str, ...]]:
    """Per type, the distinct values of that type the text writes, in order of first occurrence."""
    found: dict[FieldType, tuple[str, ...]] = {}
    for kind, pattern in _PATTERNS.items():
        values = dict.fromkeys(m.group().strip() for m in pattern.finditer(text))
        found[kind] = tuple(v for v in values if matches(kind, v))
    return found
