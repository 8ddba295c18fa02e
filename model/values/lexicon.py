"""Small shipped lexicons that tell whether a value looks like a person's or an organisation's name."""

from __future__ import annotations

import functools
import re
from importlib import resources

_CJK_NAME = re.compile(r"[\u4e00-\u9fff·]{2,5}")
_LATIN_NAME = re.compile(r"[A-Z][A-Za-z'.-]*( [A-Z][A-Za-z'.-]*){1,3}")


@functools.cache
def _words(name: str) -> frozenset[str]:
    text = resources.files("model").joinpath("data", name).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def surnames() -> frozenset[str]:
    """The shipped surnames, single and compound (欧阳)."""
    return _words("surnames.txt")


def person_ok(value: str) -> bool:
    """A 2-5 character CJK name starting with a known surname (compound first), or a capitalised Latin name."""
    if _LATIN_NAME.fullmatch(value):
        return True
    return _CJK_NAME.fullmatch(value) is not None and (
        value[:2] in _words("surnames.txt") or value[0] in _words("surnames.txt")
    )


def organisation_suffixes() -> frozenset[str]:
    """The shipped organisation suffixes (有限公司, 医院 ...): alone, they name no organisation."""
    return _words("org_suffixes.txt")


def organisation_ok(value: str) -> bool:
    """Ends with a known organisation suffix such as 有限公司 or 医院."""
    return len(value) >= 3 and any(value.endswith(suffix) for suffix in _words("org_suffixes.txt"))
