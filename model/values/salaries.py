"""A salary as job ads write it: a money range with its period (`19000-28500元/月`, `年薪40-60万`,
`15k-25k·13薪`, `8000元以上`), read with the amount parser; `面议` (negotiable) names no amount."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import NamedTuple

from model.values.amounts import parse_amount
from model.values.width import fold_width

# Negotiable: a value the ad does give, with no amount in it.
_NEGOTIABLE = re.compile(r"(?:薪资|工资|薪酬|待遇|月薪|年薪)?(?:可)?面议")
# `·13薪`: paid 13 times a year, which makes the amount before it a monthly one.
_PAID_TIMES = re.compile(r"[·*xX×]?(\d{2})薪$")
# The period in English, as bilingual ads write it (`20k-35k RMB/month`); the Chinese forms are the
# amount parser's (`元/月`, `月薪`).
_ENGLISH_PERIOD = re.compile(r"(?:/|per)(month|mo|year|yr|day|hour|hr)$", re.IGNORECASE)
_ENGLISH_PERIODS = {"mo": "month", "yr": "year", "hr": "hour"}
# An open range: `8000元以上`, `8k起`, `8000+`.
_OPEN = re.compile(r"(?:及以上|以上|起|\+)$")


class Salary(NamedTuple):
    low: Decimal
    # None for an open range (`以上`); a single amount is a range of one (`high == low`).
    high: Decimal | None
    # `month`, `year`, `day`, `hour`: as written (`元/月`, `年薪`), or `month` from `·13薪`.
    period: str | None
    currency: str | None


def negotiable(text: str) -> bool:
    return _NEGOTIABLE.fullmatch("".join(fold_width(text).split())) is not None


def parse_salary(text: str) -> Salary | None:
    """The salary the text names; None when it names none (`面议` included: see `negotiable`)."""
    body = "".join(fold_width(text).split())
    period = None
    if found := _PAID_TIMES.search(body):
        period, body = "month", body[: found.start()]
    if found := _ENGLISH_PERIOD.search(body):
        word = found[1].lower()
        period, body = _ENGLISH_PERIODS.get(word, word), body[: found.start()]
    open_ended = bool(found := _OPEN.search(body))
    if found:
        body = body[: found.start()]
    amount = parse_amount(body)
    if amount is None or (open_ended and amount.end is not None):
        return None
    high = None if open_ended else (amount.end if amount.end is not None else amount.value)
    return Salary(amount.value, high, amount.unit or period, amount.currency)
