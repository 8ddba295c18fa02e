"""Small shipped lexicons that tell whether a value looks like a person's or an organisation's name."""

from __future__ import annotations

import functools
import re
from importlib import resources

# How an English company's name ends (Shenzhen Bluewave Robotics Co., Ltd.).
ENGLISH_LEGAL_FORMS = ("Ltd", "Ltd.", "Limited", "Inc.", "LLC")
# An English organisation's name: capitalised words (a bracketed place, of, and, & among them) ending
# in a legal form or a kind of institution, or a university of a place (Finlytics Software Ltd.,
# Golden Lotus Trading (HK) Limited, Airbus Beijing Engineering Centre, University of Edinburgh).
_ENGLISH_ORG_KINDS = (
    r"(?:Co\., ?)?(?:Ltd\.?|Limited|Inc\.?|LLC|GmbH|AG|PLC|plc|Corp\.?|Corporation|Company|Group|Holdings"
    r"|University|College|Institute|Hospital|Clinic|Bank|Centre|Center|Foundation|Association|Agency)"
)
_CAPITALISED = r"(?:[A-Z][\w&'.-]*|\([A-Z][A-Za-z ]*\)|of|and|&)"
ENGLISH_ORGANISATION = re.compile(
    rf"[A-Z][\w&'.-]*(?: {_CAPITALISED}){{0,6}} {_ENGLISH_ORG_KINDS}(?![\w&])"
    rf"|(?:University|Institute|College) of(?: [A-Z][\w&'.-]*){{1,4}}"
)
_CJK_NAME = re.compile(r"[\u4e00-\u9fff·]{2,5}")
# A transliterated name, its parts joined by a middle dot (阿依古丽·买买提): no Chinese surname leads it.
_DOTTED_NAME = re.compile(r"[\u4e00-\u9fff]{1,6}(?:[·・•][\u4e00-\u9fff]{1,6}){1,3}")
_LATIN_NAME = re.compile(r"[A-ZÀ-ÖØ-Þ][A-Za-zÀ-ÖØ-öø-ÿ'.-]*( [A-ZÀ-ÖØ-Þ][A-Za-zÀ-ÖØ-öø-ÿ'.-]*){1,3}")
# A name as bilingual staff write theirs: an English given name before a Chinese surname and given
# name (Kevin 刘, Emily Chen 陈怡), or a Chinese surname before an English given name (欧阳 Vincent).
_ENGLISH_FIRST = re.compile(r"[A-Z][a-z]+(?: ?[A-Z][a-z]+)? ?(?P<cjk>[\u4e00-\u9fff]{1,3})")
_CHINESE_FIRST = re.compile(r"(?P<cjk>[\u4e00-\u9fff]{1,2}) ?[A-Z][a-z]+")


@functools.cache
def _words(name: str) -> frozenset[str]:
    text = resources.files("model").joinpath("data", name).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def surnames() -> frozenset[str]:
    """The shipped surnames, single and compound (欧阳)."""
    return _words("surnames.txt")


def person_ok(value: str) -> bool:
    """A 2-5 character CJK name starting with a known surname (compound first), a capitalised Latin
    name, a transliterated one with its middle dots, or a mixed-script one whose Chinese part starts
    with a known surname (Kevin 刘, 欧阳 Vincent)."""
    if _LATIN_NAME.fullmatch(value) or _DOTTED_NAME.fullmatch(value):
        return True
    mixed = _ENGLISH_FIRST.fullmatch(value) or _CHINESE_FIRST.fullmatch(value)
    if mixed:
        return _surnamed(mixed["cjk"])
    return _CJK_NAME.fullmatch(value) is not None and _surnamed(value)


def _surnamed(cjk: str) -> bool:
    return cjk[:2] in _words("surnames.txt") or cjk[0] in _words("surnames.txt")


def organisation_suffixes() -> frozenset[str]:
    """The shipped organisation suffixes (有限公司, 医院 ...): alone, they name no organisation."""
    return _words("org_suffixes.txt")


def organisation_ok(value: str) -> bool:
    """Ends with a known organisation suffix such as 有限公司 or 医院, or is an English organisation's name."""
    return (
        len(value) >= 3 and any(value.endswith(suffix) for suffix in _words("org_suffixes.txt"))
    ) or ENGLISH_ORGANISATION.fullmatch(value) is not None
