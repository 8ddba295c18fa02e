"""One normal form per typed value, filled in after decoding; the span's text and offsets stay as read.

Normalisation is deterministic and never guesses: a value that does not read as its type is a
`Mismatch`, with the reason a reviewer sees, and never raises.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from model.values.amounts import parse_amount, plain
from model.values.dates import parse_date
from model.values.field_types import EMAIL, ID_CARD, email_address, id_card_check_digit, matches
from model.values.phones import parse_phone
from model.values.salaries import negotiable, parse_salary
from model.values.width import fold_width
from schemas.field_sets import FieldType
from schemas.messages import Normalised


@dataclass(frozen=True)
class Mismatch:
    """Why a value is not of its label's type."""

    reason: str


def normalise(kind: FieldType, value: str) -> Normalised | Mismatch | None:
    """The value's normal form, a `Mismatch` when it is not of type `kind`, or None for types without one.

    `text`, `person` and `organisation` have no normal form, nor has a negotiable salary (`面议`);
    names are still checked against their lexicons so a typed name that is no name is a mismatch too.
    """
    if kind == "date":
        return _date(value)
    if kind == "amount":
        return _amount(value)
    if kind == "salary":
        return _salary(value)
    if kind == "phone":
        phone = parse_phone(value)
        return Normalised(kind="phone", value=phone) if phone else Mismatch("not a mainland mobile or landline number")
    if kind == "id_card":
        return _id_card(value)
    if kind == "email":
        return _email(value)
    if kind in ("person", "organisation") and not matches(kind, value):
        return Mismatch(f"does not look like a {kind}'s name")
    return None


def _date(value: str) -> Normalised | Mismatch:
    parsed = parse_date(value)
    if parsed is None:
        return Mismatch("not a valid date in a recognised format")
    start, end = parsed
    return Normalised(kind="date", value=start, end=end)


def _amount(value: str) -> Normalised | Mismatch:
    parsed = parse_amount(value)
    if parsed is None:
        return Mismatch("not an amount in a recognised format")
    return Normalised(
        kind="amount",
        value=plain(parsed.value),
        end=plain(parsed.end) if parsed.end is not None else None,
        unit=parsed.unit,
        currency=parsed.currency,
    )


def _salary(value: str) -> Normalised | Mismatch | None:
    parsed = parse_salary(value)
    if parsed is None:
        # `面议` (negotiable) is a salary the ad gives, with no amount: no normal form, no mismatch.
        return None if negotiable(value) else Mismatch("not a salary (an amount or range with its period) or 面议")
    return Normalised(
        kind="salary",
        value=plain(parsed.low),
        end=plain(parsed.high) if parsed.high is not None else None,
        unit=parsed.period,
        currency=parsed.currency,
    )


def _id_card(value: str) -> Normalised | Mismatch:
    number = "".join(fold_width(value).split()).upper()
    if len(number) == 15 and number.isascii() and number.isdigit():
        # Issued before 1999 without a check digit; upgrading it would invent one, so a person decides.
        return Mismatch("a 15-digit first-generation ID number has no check digit to verify")
    if ID_CARD.fullmatch(number) is None:
        return Mismatch("an ID number is 17 digits and a check digit (0-9 or X)")
    expected = id_card_check_digit(number[:17])
    if number[17] != expected:
        return Mismatch(f"check digit is {number[17]}, the first 17 digits give {expected}")
    return Normalised(kind="id_card", value=number)


def _email(value: str) -> Normalised | Mismatch:
    address = email_address(value)
    if EMAIL.fullmatch(address) is None:
        return Mismatch("not an e-mail address")
    # Only the domain is case-insensitive; the local part belongs to the receiving server.
    local, domain = address.rsplit("@", 1)
    return Normalised(kind="email", value=f"{local}@{domain.lower()}")


@functools.lru_cache(maxsize=8192)
def normal_form(kind: FieldType, value: str) -> Normalised | Mismatch | None:
    """`normalise`, memoised: a value is checked (is it of its type?) and then normalised, and the
    validation loop checks the same values again; both results are immutable."""
    return normalise(kind, value)
