"""Mainland phone numbers in any of their spellings, as one E.164-style string; other countries' numbers
when written with their country code (+65 8123 4590 -> +6581234590), digits only, unchecked beyond their count."""

from __future__ import annotations

import re

from model.values.width import fold_width

_SPACING = re.compile(r"[\s\-().]")
_COUNTRY = re.compile(r"^(?:\+|00)86")
_EXTENSION = re.compile(r"(?:;ext=|转|分机|ext\.?|x)\s*(\d{1,6})$", re.IGNORECASE)
_MOBILE = re.compile(r"(?:86)?(1[3-9]\d{9})")
# 010 and 020-029 have two-digit area codes, every other one three; a local number never starts with 0.
_LANDLINE = re.compile(r"0(10|2\d|[3-9]\d\d)([1-9]\d{6,7})")
_SERVICE = re.compile(r"(400|800)(\d{7})")
# E.164: a country code and the number, 15 digits at most; 8 at least keeps a short code or a year out.
_ABROAD = re.compile(r"(?:\+|00)([1-9]\d{7,14})")
# The fewest digits any phone `parse_phone` reads is written with (a number abroad after its +).
FEWEST_DIGITS = 8


def parse_phone(text: str) -> str | None:
    """`+8613800138000` for a mobile, `+86-10-12345678` for a landline (`;ext=` after it); None otherwise."""
    folded = fold_width(text).strip()
    extension = _EXTENSION.search(folded)
    if extension:
        folded = folded[: extension.start()]
    digits = _SPACING.sub("", folded)
    international = _COUNTRY.match(digits)
    if not international and (abroad := _ABROAD.fullmatch(digits)) and not extension:
        return "+" + abroad[1]
    if international:
        digits = digits[international.end() :]
    if not digits.isascii() or not digits.isdigit():
        return None
    if (mobile := _MOBILE.fullmatch(digits)) and not extension:
        return "+86" + mobile[1]
    # Dialled from abroad a landline drops its trunk 0 (+86 10 ...); put it back to read the area code.
    if international and not digits.startswith("0"):
        digits = "0" + digits
    suffix = f";ext={extension[1]}" if extension else ""
    if landline := _LANDLINE.fullmatch(digits):
        return f"+86-{landline[1]}-{landline[2]}{suffix}"
    if service := _SERVICE.fullmatch(digits):
        return f"+86-{service[1]}-{service[2]}{suffix}"
    return None
