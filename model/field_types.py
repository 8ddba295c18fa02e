"""What a typed field's value must look like: whole values (`matches`) and decode-time prefixes (`viable_prefix`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from model.lexicon import organisation_ok, person_ok
from model.width import fold_width
from schemas.messages import Document

FieldType = Literal["text", "phone", "id_card", "date", "amount", "email", "person", "organisation"]

MOBILE = re.compile(r"1[3-9][0-9]{9}")
ID_CARD = re.compile(r"[0-9]{17}[0-9X]")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
_EMAIL_CHARS = re.compile(r"[A-Za-z0-9._%+@-]*")
# ISO 7064 MOD 11-2 weights of the first 17 digits, and the check character per remainder.
_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CHECK = "10X98765432"


def field_types_of(doc: Document) -> Mapping[str, FieldType] | None:
    """The document's field type per label, once ingestion resolves them (`Document.field_types`)."""
    return getattr(doc, "field_types", None)


def id_card_check_digit(first17: str) -> str:
    """The 18th character of a mainland ID number (GB 11643, ISO 7064 MOD 11-2)."""
    digits = fold_width(first17)
    if len(digits) != 17 or not digits.isascii() or not digits.isdigit():
        raise ValueError("an ID number's check digit needs exactly 17 digits")
    return _CHECK[sum(int(d) * w for d, w in zip(digits, _WEIGHTS, strict=True)) % 11]


def matches(kind: FieldType, value: str) -> bool:
    """Whether the whole value is valid for its type; `text` always is."""
    folded = fold_width(value).strip()
    if kind == "phone":
        return MOBILE.fullmatch(folded.replace("-", "").replace(" ", "").removeprefix("+86")) is not None
    if kind == "id_card":
        upper = folded.upper()
        return ID_CARD.fullmatch(upper) is not None and id_card_check_digit(upper[:17]) == upper[17]
    if kind == "email":
        return EMAIL.fullmatch(folded) is not None
    if kind == "person":
        return person_ok(folded)
    if kind == "organisation":
        return organisation_ok(folded)
    return True


def viable_prefix(kind: FieldType, prefix: str) -> bool:
    """Whether `prefix` can still grow into a valid value: called per decode step, so only cheap checks."""
    folded = fold_width(prefix)
    if kind == "phone":
        return (
            len(folded) <= 11
            and folded.isascii()
            and (folded == "" or folded.isdigit())
            and folded[:1] in ("", "1")
            and (len(folded) < 2 or folded[1] in "3456789")
        )
    if kind == "id_card":
        head, tail = folded[:17], folded[17:]
        return (
            len(folded) <= 18 and (head == "" or (head.isascii() and head.isdigit())) and tail in ("", *"0123456789Xx")
        )
    if kind == "email":
        return _EMAIL_CHARS.fullmatch(folded) is not None and folded.count("@") <= 1
    return True
