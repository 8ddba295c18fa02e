"""The items of a list a value stands in: 中铁建工集团、西门子（中国）有限公司、雄安集团; 杭州/上海/深圳;
华东政法大学（法学学士）和香港城市大学; 南京航空航天大学（本）→ 中国科学院大学; 中国商飞上海飞机设计研究院
（2018-2022）；Airbus Beijing Engineering Centre（2022-今）.

Writers list the values of a label that takes several (the organisations a news item names, the
schools of a résumé, the places a job is offered in), and the model answers one of them. The items
beside a value are found here by their separators alone; whether an item is a value of the label's
type is the caller's test (model/answers/listed.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Between two items: a list's marks, a coordinating word, an arrow of a résumé's sequence.
_BETWEEN = re.compile(r"\s*(?:、|／|/|→|->|以及|和|与|及|&|；|;)\s*|\s+and\s+")
# Where a list ends: a clause's or a line's end, a key's colon, a cell's bar.
_ENDS = frozenset("\n，,。：:！!？?│|\t")
_OPEN = {"（": "）", "(": ")"}
# A closing gloss is no part of an item: 华东政法大学（法学学士）.
_GLOSS = re.compile(r"\s*[（(][^（()）]*[）)]\s*$")
# Items a list may hold before it is no list of names (a sentence's clauses).
MAX_ITEM = 40

# (start, end) of an item, and whether the walk goes right -> the span of the label's value it
# holds: the whole item, or, at the list's far end, a value the item starts with going right
# (中金资本 in 中金资本跟投) or ends with going left; None: no value, and the list ends.
Test = Callable[[int, int, bool], tuple[int, int] | None]


def _item_end(text: str, start: int) -> int:
    """Where the item from `start` ends: at a list's end or the next item mark, parentheses skipped."""
    at, depth = start, 0
    while at < len(text) and at - start <= MAX_ITEM:
        ch = text[at]
        if ch in _OPEN:
            depth += 1
        elif ch in "）)" and depth:
            depth -= 1
        elif not depth and (ch in _ENDS or _BETWEEN.match(text, at)):
            break
        at += 1
    return at


def _item_start(text: str, end: int) -> int:
    """Where the item that ends at `end` starts, walking back to a list's end or an item mark."""
    at, depth = end, 0
    while at > 0 and end - at <= MAX_ITEM:
        ch = text[at - 1]
        if ch in "）)":
            depth += 1
        elif ch in _OPEN and depth:
            depth -= 1
        elif not depth and (ch in _ENDS or _mark_ending_at(text, at)):
            break
        at -= 1
    return at


def _mark_ending_at(text: str, at: int) -> bool:
    return any(m.end() == at for m in _BETWEEN.finditer(text, max(0, at - 6), at))


def unglossed(text: str, start: int, end: int) -> tuple[int, int]:
    """An item's span less its surrounding spaces and a closing gloss."""
    item = text[start:end]
    if (gloss := _GLOSS.search(item)) and gloss.start() > 0:
        item = item[: gloss.start()]
    stripped = item.strip()
    start += len(item) - len(item.lstrip())
    return start, start + len(stripped)


def siblings(text: str, start: int, end: int, test: Test) -> list[tuple[int, int]]:
    """The values listed beside the value at text[start:end], in order of appearance: each item the
    walk reaches that `test` takes, left and right of the value, until an item it does not take."""
    found: list[tuple[int, int]] = []
    at = end
    # The value may carry its own gloss: 华东政法大学 of 华东政法大学（法学学士）和….
    if gloss := re.match(r"\s*[（(][^（()）]*[）)]", text[at:]):
        at += gloss.end()
    while (mark := _BETWEEN.match(text, at)) and mark.end() > at:
        item_end = _item_end(text, mark.end())
        span = test(*unglossed(text, mark.end(), item_end), True)
        if span is None:
            break
        found.append(span)
        if span[1] < unglossed(text, mark.end(), item_end)[1]:
            break  # the item runs on past its value (中金资本跟投): the list ends there
        at = item_end
    at = start
    while (mark := _mark_before(text, at)) is not None:
        item_start = _item_start(text, mark)
        span = test(*unglossed(text, item_start, mark), False)
        if span is None:
            break
        found.insert(0, span)
        if span[0] > unglossed(text, item_start, mark)[0]:
            break
        at = item_start
    return found


def _mark_before(text: str, at: int) -> int | None:
    """Where the item mark that ends at `at` starts, if one does (spaces before `at` allowed)."""
    for m in _BETWEEN.finditer(text, max(0, at - 8), at):
        if m.end() == at and m.end() > m.start():
            return m.start()
    return None
