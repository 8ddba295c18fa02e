"""Street addresses: where a place a text names runs on into a street and a house number
(苏州工业园区星湖街328号创意产业园2号楼1506室), the address is the place a person reading the text
means by 签约地点 or 工作地点, and what the hand-written corpora's writers marked.

LAC tags the parts (苏州, 星湖街328号, 创意产业园2号楼) as separate places and the model answers
the first, so the address is read from the place's first character: parts that each end in a unit of
an address (区, 路, 号, 楼, 室 ...), with nothing between them, up to a house number or beyond.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_UNIT = (
    "省|自治区|市|区|县|镇|乡|街道|大道|路|街|巷|弄|胡同|号院|号|栋|幢|座|楼|层|室|单元|"
    "工业区|产业园|园区|园|广场|中心|大厦|写字楼|新城|村|期"
)
_PART = rf"[\u4e00-\u9fffA-Za-z0-9０-９]{{0,12}}?(?:{_UNIT})"
_ADDRESS = re.compile(rf"(?:{_PART})+")
# What makes a run of places an address: a number of a house, building, floor or room.
_HOUSE_NUMBER = re.compile(r"[0-9０-９]+(?:号|栋|幢|楼|层|室)")


def address_end(text: str, start: int) -> int | None:
    """Where the street address beginning at `start` ends, if the text writes one there (a run of
    address parts holding a house number); else None."""
    found = _ADDRESS.match(text, start)
    if found is None:
        return None
    # Up to the last house, building, floor or room number's part: what follows is no longer the address's.
    numbers = list(_HOUSE_NUMBER.finditer(found.group()))
    if not numbers:
        return None
    tail = _ADDRESS.match(found.group(), numbers[-1].end())
    return start + (tail.end() if tail else numbers[-1].end())


# An address written in English: rooms, floors and buildings, a house number and a street, then the
# district and city (Room 1803, Tower 2, 1717 Nanjing West Road, Jing'an, Shanghai). LAC tags none of it.
_EN_WORD = r"[A-Z][\w'-]*"
_ENGLISH_ADDRESS = re.compile(
    r"(?<![\w-])(?:(?:Room|Rm\.|Suite|Unit|Flat|Floor|Level|Block|Tower|Building|Bldg\.) [\w-]+,? )*"
    rf"(?:No\.\s?)?\d+[A-Za-z]?,? (?:{_EN_WORD} ){{1,4}}"
    r"(?:Road|Rd\.|Street|St\.|Avenue|Ave\.|Boulevard|Blvd\.|Lane|Highway|Drive|Way)"
    rf"(?:, {_EN_WORD}(?: {_EN_WORD}){{0,2}}){{0,3}}"
)


def english_addresses(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each street address the text writes in English."""
    return [(m.start(), m.end()) for m in _ENGLISH_ADDRESS.finditer(text)]


# A part of a place that is a street or a site, not a district: a place's district stops before it.
_STREET = re.compile(r"(?:路|街|道|巷|弄|胡同|号|楼|室|广场|大厦|中心|园)$")


def district_end(places: Sequence[tuple[int, int, str]], start: int, end: int) -> int | None:
    """Where a place written from `start` to `end` ends with its districts: the places (start, end,
    text) that continue it with nothing between (厦门 思明区, 北京 海淀, 上海市 静安区) or that begin
    where it does and run on (天津滨海新区 for 天津), up to a street or a site (南京西路); None where
    none continues it."""
    ends = {p_end for p_start, p_end, text in places if p_start == start and p_end > end and not _STREET.search(text)}
    at = max(ends, default=end)
    while nxt := next((p for p in places if p[0] == at and not _STREET.search(p[2])), None):
        at = nxt[1]
    return at if at > end else None
