"""What a typed field's value must look like: whole values (`matches`) and decode-time prefixes (`viable_prefix`)."""

from __future__ import annotations

import re

from model.values.amounts import parse_amount
from model.values.dates import parse_date
from model.values.lexicon import organisation_ok, person_ok
from model.values.phones import FEWEST_DIGITS, parse_phone
from model.values.salaries import negotiable, parse_salary
from model.values.width import fold_width, han_squeezed
from schemas.field_sets import FieldType

ID_CARD = re.compile(r"[0-9]{17}[0-9X]")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
# OCR and line wrapping break an address after its @ (emily.chen@ 163.com): read it joined.
_EMAIL_BREAK = re.compile(r"(?<=@)\s+")
_EMAIL_CHARS = re.compile(r"[A-Za-z0-9._%+@-]*")
_PHONE_CHARS = re.compile(r"[0-9+()\-. ]*(?:(?:转|分机?|e|ex|ext\.?|x)\s*[0-9]*)?", re.IGNORECASE)
# ISO 7064 MOD 11-2 weights of the first 17 digits, and the check character per remainder.
_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CHECK = "10X98765432"


def id_card_check_digit(first17: str) -> str:
    """The 18th character of a mainland ID number (GB 11643, ISO 7064 MOD 11-2)."""
    digits = fold_width(first17)
    if len(digits) != 17 or not digits.isascii() or not digits.isdigit():
        raise ValueError("an ID number's check digit needs exactly 17 digits")
    return _CHECK[sum(int(d) * w for d, w in zip(digits, _WEIGHTS, strict=True)) % 11]


def email_address(text: str) -> str:
    """The address as written, less a break after its @."""
    return _EMAIL_BREAK.sub("", fold_width(text).strip())


def matches(kind: FieldType, value: str) -> bool:
    """Whether the whole value is valid for its type; `text` always is.

    Phones, dates and amounts match exactly when the normaliser can read them, so a value that
    passes here always gets a normal form.
    """
    folded = fold_width(value).strip()
    if kind == "phone":
        return parse_phone(folded) is not None
    if kind == "date":
        return parse_date(folded) is not None
    if kind == "amount":
        return parse_amount(folded) is not None
    if kind == "salary":
        return parse_salary(folded) is not None or negotiable(folded)
    if kind == "id_card":
        upper = "".join(folded.split()).upper()
        return ID_CARD.fullmatch(upper) is not None and id_card_check_digit(upper[:17]) == upper[17]
    if kind == "email":
        return EMAIL.fullmatch(email_address(folded)) is not None
    # A name letter-spaced or broken by OCR (许 文 澜) is read as written without the spaces.
    if kind == "person":
        return person_ok(han_squeezed(folded)[0])
    if kind == "organisation":
        return organisation_ok(han_squeezed(folded)[0])
    return True


def complete_value(kind: FieldType, value: str) -> bool:
    """Whether `value` is a whole value of its type that ends on a letter or digit: where the grammar
    lets a value of a checked type end (model/grammar/source.py), so that a phone cut a digit short or
    an e-mail cut after its `@` is no answer the model can give."""
    if not value[-1:].isalnum():
        return False
    # Cheap refusals first: the grammar asks this of every run of a text's digits (dates, sums).
    if kind == "phone" and sum(ch.isdigit() for ch in value) < FEWEST_DIGITS:
        return False
    if kind == "email" and "@" not in value:
        return False
    return matches(kind, value)


def viable_prefix(kind: FieldType, prefix: str) -> bool:
    """Whether `prefix` can still grow into a valid value: called per decode step, so only cheap checks."""
    folded = fold_width(prefix)
    if kind == "phone":
        # Every spelling parse_phone reads (spaces, dashes, +86, area codes in brackets, extensions):
        # a mobile-only prefix check cut `135 1234 5678` off at `135`.
        return len(folded) <= 32 and _PHONE_CHARS.fullmatch(folded) is not None
    if kind == "id_card":
        head, tail = folded[:17], folded[17:]
        return (
            len(folded) <= 18 and (head == "" or (head.isascii() and head.isdigit())) and tail in ("", *"0123456789Xx")
        )
    if kind == "email":
        return _EMAIL_CHARS.fullmatch(folded) is not None and folded.count("@") <= 1
    return True
