"""Dates as Chinese and international documents write them, read into ISO 8601.

A value keeps the precision it was written with (`2024年3月` is `2024-03`, not a made-up day);
quarters and halves of a year become day ranges because they name one. Slash and dot dates with the
year last are read day first (`15/03/2024`), the order of the documents this pipeline reads.
"""

from __future__ import annotations

import calendar
import re
from datetime import date

from model.values.numerals import chinese_number
from model.values.width import fold_width

# Runs of Chinese numerals (二〇二四, 十五, 廿) that cn2an turns into digits before the patterns run;
# contracts write the date in the amounts' financial numerals too (贰零贰肆年陆月拾贰日).
_CN_NUMERAL = re.compile(r"[〇零一二三四五六七八九十两廿卅壹贰叁肆伍陆柒捌玖拾]+")
_WEEKDAY = re.compile(r"[(（]?(星期|周|礼拜)[一二三四五六日天][)）]?$")
_YMD_CN = re.compile(r"(?:(?P<y>\d{4})年)?(?:(?P<m>\d{1,2})月份?)?(?:(?P<d>\d{1,2})[日号])?")
_YMD_SEP = re.compile(r"(?P<y>\d{4})(?P<sep>[-/.])(?P<m>\d{1,2})(?:(?P=sep)(?P<d>\d{1,2}))?")
_DMY = re.compile(r"(?P<d>\d{1,2})(?P<sep>[-/.])(?P<m>\d{1,2})(?P=sep)(?P<y>\d{4})")
_COMPACT = re.compile(r"(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})")
_YEAR = re.compile(r"(?P<y>\d{4})年?")
_QUARTER = re.compile(r"(?P<y>\d{4})(?:年|-)?(?:第(?P<q>[1-4])季度?|(?P<q2>[1-4])季度|[Qq](?P<q3>[1-4]))")
_HALF = re.compile(r"(?P<y>\d{4})年(?P<h>上|下)半年")
# English dates, read with the spaces taken out (June 12, 2025 -> June12,2025; 28 February 2026).
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
ENGLISH_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_MONTH = rf"(?P<mon>{ENGLISH_MONTH})"
_ORDINAL = r"(?:st|nd|rd|th)?"
_MDY_EN = re.compile(rf"{_MONTH}(?P<d>\d{{1,2}}){_ORDINAL},?(?P<y>\d{{4}})", re.IGNORECASE)
_DMY_EN = re.compile(rf"(?P<d>\d{{1,2}}){_ORDINAL}(?:of)?{_MONTH},?(?P<y>\d{{4}})", re.IGNORECASE)
_MY_EN = re.compile(rf"{_MONTH},?(?P<y>\d{{4}})", re.IGNORECASE)
# A deed's day in words: the fifth day of March, 2025.
_UNITS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
_ORDINAL_WORDS = (
    *_UNITS, "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
    "seventeenth", "eighteenth", "nineteenth", "twentieth", *(f"twenty-{u}" for u in _UNITS),
    "thirtieth", "thirty-first",
)  # fmt: skip
ENGLISH_ORDINAL_DAY = "(?:" + "|".join(sorted(_ORDINAL_WORDS, key=len, reverse=True)) + ")"
_WORDS_EN = re.compile(rf"(?:the)?(?P<word>{ENGLISH_ORDINAL_DAY})day(?:of)?{_MONTH},?(?P<y>\d{{4}})", re.IGNORECASE)
# Where a range may split; `-` and `/` also separate a date's own parts, so every split is tried.
_RANGE_SEP = re.compile(r"至|到|~|—+|–|-|/")

# The longest real range (二〇二四年十二月三十一日至二〇二五年十二月三十一日) is 25 characters; a cap
# well above it bounds the range search, which tries every separator, on a hostile span.
MAX_CHARS = 64

Day = tuple[int, int | None, int | None]  # year, month, day; None where the text gave less


def parse_date(text: str) -> tuple[str, str | None] | None:
    """`(start, end)` in ISO 8601, `end` None unless the text names a range; None when it is not a date."""
    if len(text) > MAX_CHARS:
        return None
    clean = _prepare(text)
    if not clean:
        return None
    period = _period(clean)
    if period is not None:
        return period
    single = _day(clean)
    if single is not None:
        return _iso(single), None
    for sep in _RANGE_SEP.finditer(clean):
        start = _day(clean[: sep.start()])
        if start is None:
            continue
        end = _day(clean[sep.end() :], inherit=start)
        if end is not None and _ordered(start, end):
            return _iso(start), _iso(end)
    return None


def _prepare(text: str) -> str:
    folded = "".join(fold_width(text).split())
    folded = _WEEKDAY.sub("", folded)
    return _CN_NUMERAL.sub(_numeral, folded)


def _numeral(match: re.Match[str]) -> str:
    value = chinese_number(match.group())
    # A numeral that is not a whole number (or not one at all) stays, and the patterns then refuse it.
    return str(int(value)) if value is not None and value == int(value) else match.group()


def _day(text: str, inherit: Day | None = None) -> Day | None:
    """One date at the precision written; with `inherit`, the end of a range may leave out the year and month."""
    for pattern in (_YMD_SEP, _DMY, _COMPACT, _YEAR):
        if found := pattern.fullmatch(text):
            parts = found.groupdict()
            return _valid(int(parts["y"]), _int(parts.get("m")), _int(parts.get("d")))
    for pattern in (_MDY_EN, _DMY_EN, _MY_EN, _WORDS_EN):
        if found := pattern.fullmatch(text):
            month = _MONTHS.index(found["mon"][:3].lower()) + 1
            parts = found.groupdict()
            day = _ORDINAL_WORDS.index(parts["word"].lower()) + 1 if parts.get("word") else _int(parts.get("d"))
            return _valid(int(found["y"]), month, day)
    found = _YMD_CN.fullmatch(text)
    if found is None or not any(found.groups()):
        return None
    year, month, day = _int(found["y"]), _int(found["m"]), _int(found["d"])
    if year is None and inherit is not None:
        year, month = inherit[0], month if month is not None else inherit[1]
    if year is None or (day is not None and month is None):
        return None
    return _valid(year, month, day)


def _valid(year: int, month: int | None, day: int | None) -> Day | None:
    if month is None:
        return (year, None, None) if year >= date.min.year else None
    try:
        date(year, month, day or 1)
    except ValueError:
        return None
    return year, month, day


def _period(text: str) -> tuple[str, str] | None:
    """A quarter or half year as its first and last day."""
    quarter, half = _QUARTER.fullmatch(text), _HALF.fullmatch(text)
    found = quarter or half
    # Four digits include 0000, which no calendar has.
    if found is None or int(found["y"]) < date.min.year:
        return None
    if quarter:
        q = int(quarter["q"] or quarter["q2"] or quarter["q3"])
        return _months(int(quarter["y"]), 3 * q - 2, 3 * q)
    first = 1 if found["h"] == "上" else 7
    return _months(int(found["y"]), first, first + 5)


def _months(year: int, first: int, last: int) -> tuple[str, str]:
    return date(year, first, 1).isoformat(), date(year, last, calendar.monthrange(year, last)[1]).isoformat()


def _ordered(start: Day, end: Day) -> bool:
    return (start[0], start[1] or 1, start[2] or 1) <= (end[0], end[1] or 12, end[2] or 31)


def _iso(day: Day) -> str:
    year, month, dom = day
    return "-".join(f"{part:0{width}d}" for part, width in ((year, 4), (month, 2), (dom, 2)) if part is not None)


def _int(group: str | None) -> int | None:
    return int(group) if group else None
