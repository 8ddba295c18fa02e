"""Typed values written in a free text, as the type checks read them: phones, e-mails, dates, amounts,
organisations, salaries and mixed-script names.

Each pattern is generous (it finds what looks like a value of the type), and a mention counts only
when the type's own reader (`model/values/field_types.py:matches`) accepts it: the same judgement
that decides whether a label's value is of its type. Amounts need a currency or 元 (a bare number
is no amount), dates a year or a month with a day.
"""

from __future__ import annotations

import functools
import re

from model.values.amounts import ENGLISH_AMOUNT
from model.values.dates import ENGLISH_MONTH, ENGLISH_ORDINAL_DAY
from model.values.field_types import matches
from model.values.forms import FORM_KEYS
from model.values.lexicon import ENGLISH_ORGANISATION, organisation_suffixes
from model.values.width import inner_space
from schemas.field_sets import FieldType

D = "[0-9０-９]"
CN = "[〇零一二三四五六七八九十两壹贰叁肆伍陆柒捌玖拾]"  # a date's numerals, 小写 or 大写
BIG = "[零壹贰叁肆伍陆柒捌玖拾佰仟万亿一二三四五六七八九十百千两]"
# Between a phone's digit groups: a dash (with spaces around it, as OCR and typists leave them) or
# one space (０２０-3889 1456, 0519 - 8699 2317, １３９－１０２８－６６７３).
_GAP = r"(?:\s?[-－]\s?| |\u3000)?"
_EN_MONTH = rf"(?i:{ENGLISH_MONTH})"
_DATE = (
    # OCR's breaks and spaces inside one (2020年12月\n 8日, 2023 - 06 - 29); `parse_date` reads them.
    rf"{D}{{4}}(?:\s?年\s?{D}{{1,2}}\s?月(?:\s{{0,2}}{D}{{1,2}}\s?[日号])?"
    rf"|(?P<sep> ?[-/.] ?){D}{{1,2}}(?P=sep){D}{{1,2}})"
    rf"|{CN}{{4}}\s?年\s?{CN}{{1,2}}\s?月(?:\s?{CN}{{1,3}}\s?[日号])?"
)
# June 12, 2025; 28 February 2026 (English months, `parse_date` decides)
_DATE_IN_ENGLISH = (
    rf"(?<![A-Za-z])(?:{_EN_MONTH}\s\d{{1,2}}(?:st|nd|rd|th)?,?\s\d{{4}}|\d{{1,2}}(?:st|nd|rd|th)?\s{_EN_MONTH},?\s\d{{4}})"
    rf"|(?i:the\s)?(?i:{ENGLISH_ORDINAL_DAY})\s(?i:day\sof)\s{_EN_MONTH},?\s\d{{4}}"
)
_AMOUNT = (
    rf"(?:人民币|美元|港币|港元|欧元|RMB|CNY|[¥￥$])\s?{D}[0-9０-９,，]*(?:\.{D}+)?(?:百万|千万|亿|万|千)?元?"
    rf"|{D}[0-9０-９,]*(?:\.{D}+)?(?:百万|千万|亿|万|千)?元"
    # 大写, a currency's name before it, OCR's break inside it (人民币叁拾\n陆万元整)
    rf"|(?:人民币|美元|美金|港元|港币|欧元|日元|英镑)?{BIG}+(?:\n{BIG}+)?元整?"
)
# In English words: US Dollars Sixty-Two Thousand Four Hundred Only
_AMOUNT_IN_ENGLISH = rf"(?<![A-Za-z])(?i:{ENGLISH_AMOUNT})(?![A-Za-z])"
_PATTERNS: dict[FieldType, re.Pattern[str]] = {
    "phone": re.compile(
        rf"(?<![0-9０-９])(?:(?:\+|00|＋)?86{_GAP})?"
        rf"(?:[1１][3-9３-９]{D}(?:{_GAP}{D}){{8}}|0{D}{{2,3}}{_GAP}{D}(?:{_GAP}{D}){{6,7}}|[48]00{_GAP}{D}{{3}}{_GAP}{D}{{4}})(?![0-9０-９])"
        # Another country's number, written with its code (+65 8123 4590): `parse_phone` counts the digits.
        rf"|[+＋](?![8８][6６]){D}{{1,3}}(?:[ -]?{D}{{2,5}}){{2,5}}(?![0-9０-９])"
    ),
    # OCR breaks an address after its @ (emily.chen@ 163.com); the e-mail reader joins it again.
    "email": re.compile(r"[A-Za-z0-9._%+-]+@\s?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"),
    "date": re.compile(_DATE + "|" + _DATE_IN_ENGLISH),
    "amount": re.compile(_AMOUNT + "|" + _AMOUNT_IN_ENGLISH),
}
# Every English date holds a month's name and every English amount a currency's (the alternatives
# above). A text with neither is searched without those alternatives: the same mentions, about 3x
# faster with the cue's own search (each English alternative is tried at every position of the text;
# `python -m ops.bench.mentions`, ops/BENCHMARKS.md).
_ENGLISH_CUES: dict[FieldType, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "date": (re.compile("(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"), re.compile(_DATE)),
    "amount": (re.compile("(?i:dollar|renminbi|yuan|euro|pound|usd|rmb|cny|eur|gbp|hkd)"), re.compile(_AMOUNT)),
}
# A run of name characters ending in an organisation's suffix; the lexicon confirms the suffix. Words
# that begin a clause (于, 在, 从, 与, 的 ...) are left out so the mention starts near the name. A
# bare 公司 is left out too: "具体内容以公司公告为准" names no company (generated news says so).
_ORG_CHARS = r"[^\W\d_于在从与和及的是为了年月日到去带住向由]"
# A Latin word inside a Chinese name stands between spaces (武汉光谷 Nova 生物医药有限公司, 厦门 ＩＣＣ 国际…).
_LATIN_GAP = "(?: (?=[A-Za-zＡ-Ｚａ-ｚ])|(?<=[A-Za-zＡ-Ｚａ-ｚ]) )"
# A line break inside a name (广西医科大学第一附\n属医院); `_matched` keeps it only where OCR wrapped a word.
_HAN_BREAK = r"(?<=[\u4e00-\u9fff])\n(?=[\u4e00-\u9fff])"
_PATTERNS["organisation"] = re.compile(
    rf"{_ORG_CHARS}(?:{_ORG_CHARS}|{_LATIN_GAP}|{_HAN_BREAK}){{1,30}}?"
    r"(?:有限责任公司|股份有限公司|有限公司|集团|医院|大学|学院|研究院|研究所|学校|中学|事务所|银行)"
    rf"|{ENGLISH_ORGANISATION.pattern}"
)
# A salary: a range of figures (15-25K·13薪, 6千至9千元, 八千到一万二) or one figure after a word of pay
# (月薪5500起); `matches` (model/values/salaries.py) decides. A figure starts with 1-9, so that an area
# code and its number (0592-5551234) are no range. A mention after a word of pay is offered with and
# without it (月薪8000-12000元 and 8000-12000元: writers' values differ).
_DIGITS = r"[1-9１-９][0-9０-９,，]*(?:\.[0-9０-９]+)?\s?[kKwW千万]?"
_FIGURE = f"(?:{_DIGITS}|[一二两三四五六七八九十][零一二三四五六七八九十两百千万]*)"
_CURRENCY = r"(?:人民币|RMB\s?|[¥￥$])?"
_PAY = "(?:月薪|年薪|底薪|日薪|时薪)"
_TO = "(?:-|－|~|～|—|至|到)"
_PATTERNS["salary"] = re.compile(
    rf"(?:{_PAY}\s?)?(?<![0-9０-９]){_CURRENCY}{_FIGURE}\s?(?:元|RMB)?\s?{_TO}\s?{_CURRENCY}{_FIGURE}(?![0-9０-９])"
    r"(?:\s?(?:元|RMB))?(?:\s?(?:/|per)\s?(?:月|年|天|日|小时|month|year|day|hour))?(?:[·*][0-9]{2}薪)?"
    rf"|{_PAY}\s?{_FIGURE}(?![0-9０-９.,，kKwW千万零一二三四五六七八九十两百])(?!\s?元?\s?{_TO})\s?元?(?:/月|/年)?(?:以上|起)?"
)
_PAY_WORD = re.compile(rf"^{_PAY}\s?")
_LATIN_HEAD = re.compile(r"^[A-Za-z]+ (?=[\u4e00-\u9fff])")


def _spellings(kind: FieldType, value: str) -> tuple[str, ...]:
    if kind == "salary" and (pay := _PAY_WORD.match(value)):
        return value, value[pay.end() :]
    if kind == "organisation" and (head := _LATIN_HEAD.match(value)):
        return value, value[head.end() :]  # Partner 臻锐资本集团: the English word may be the line's, not the name's
    if kind == "person" and (mixed := _LATIN_THEN_CJK.match(value)):
        return tuple(mixed["latin"] + mixed["cjk"][:n] for n in range(len(mixed["cjk"]), 0, -1))
    return (value,)


# A mixed-script name (Kevin 刘, Emily Chen 陈怡, 欧阳 Vincent): LAC and jieba split them. The Chinese
# part after an English given name is a surname and at most two more characters: each length is
# offered (Jessica 黄本人吧 holds Jessica 黄), and the lexicon's surname check decides.
# A name after an English title is a person's, in either script (Dr. Anna Müller, Dr. 任嘉和).
_TITLED = "|".join(f"(?<={re.escape(title)} )" for title in ("Dr.", "Mr.", "Ms.", "Mrs.", "Prof."))
_PATTERNS["person"] = re.compile(
    r"(?<![A-Za-z])[A-Z][a-z]+(?: ?[A-Z][a-z]+)? ?[\u4e00-\u9fff]{1,3}"
    r"|(?<![\u4e00-\u9fff])[\u4e00-\u9fff]{1,2} ?[A-Z][a-z]+(?![A-Za-z])"
    rf"|(?:{_TITLED})(?:[A-Z][a-zà-öø-ÿ]+(?: [A-Z][a-zà-öø-ÿ]+){{1,2}}|[\u4e00-\u9fff]{{2,3}}(?![\u4e00-\u9fff]))"
)
_LATIN_THEN_CJK = re.compile(r"^(?P<latin>.*[a-z] ?)(?P<cjk>[\u4e00-\u9fff]{1,3})$")
MENTIONED_TYPES: tuple[FieldType, ...] = tuple(_PATTERNS)


def pattern_for(kind: FieldType, text: str) -> re.Pattern[str]:
    """The kind's pattern, without its English alternatives where `text` names no month or currency."""
    cue = _ENGLISH_CUES.get(kind)
    return cue[1] if cue is not None and not cue[0].search(text) else _PATTERNS[kind]


def _matched(kind: FieldType, pattern: re.Pattern[str], text: str) -> list[str]:
    """The pattern's matches; an organisation's run on where the one before ended, joined to it: the
    pattern stops at the first suffix, so 徐州医科大学附属医院 is matched as 徐州医科大学 and
    附属医院, and the second alone names nothing (the model, made to choose, took 附属医院)."""
    found, start, end = [], -1, -1
    for m in pattern.finditer(text):
        begins = m.start()
        if kind == "organisation" and "\n" in m.group():
            # A line's end, not OCR's wrap of a word (inner_space): the name starts on the next line.
            begins = max(
                (i + 1 for i in range(m.start(), m.end()) if text[i] == "\n" and not inner_space(text, i)),
                default=begins,
            )
        start = start if kind == "organisation" and begins == end else begins
        end = m.end()
        found.append(text[start:end])
    return found


@functools.lru_cache(maxsize=256)
def mentions(text: str) -> dict[FieldType, tuple[str, ...]]:
    """Per type, the distinct values of that type the text writes, in order of first occurrence."""
    found: dict[FieldType, tuple[str, ...]] = {}
    for kind in _PATTERNS:
        values = dict.fromkeys(
            v for m in _matched(kind, pattern_for(kind, text), text) for v in _spellings(kind, m.strip())
        )
        # A form's key is no value (毕业学校 reads as a school to the organisation pattern), nor is a
        # bare suffix (股份有限公司 after 内蒙古伊利实业集团, whose 集团 ended the match before it).
        found[kind] = tuple(v for v in values if matches(kind, v) and v not in FORM_KEYS | organisation_suffixes())
    return found
