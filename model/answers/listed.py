"""Values listed beside a value: where a label takes several values and the text lists them
(签约方：中铁建工集团、西门子（中国）有限公司、雄安集团), the model answers one item and the others
are added from the list, each an entity of the label's type.

Only in records that go to review anyway: a listed value is the text's structure read by a rule, and
the person reviewing sees it with its reason. A record bound for fields is left as the model gave it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from model.answers.candidates import sources
from model.answers.checks import claimed, label_kind, taken_by_others
from model.answers.validate import Extraction, normalised
from model.values.entities import Entity
from model.values.field_types import matches
from model.values.lists import Test, siblings
from model.values.mentions import mentions
from schemas.field_sets import SINGLE_VALUE_LABELS
from schemas.messages import Document, ReviewCode, ReviewReason


def add_listed(doc: Document, extraction: Extraction, entities: Sequence[Entity]) -> None:
    """Adds to `extraction` the items listed beside each value of a label that takes several."""
    if doc.task != "extract" or not extraction.needs_review:
        return
    single = SINGLE_VALUE_LABELS.get(doc.field_set, frozenset()) if doc.field_set else frozenset()
    written = mentions(doc.text)
    for label in doc.labels:
        tags, types = sources(doc, label)
        spans = extraction.fields.get(label)
        if label in single or not spans or not (tags or types):
            continue
        names = {(e.start, e.end) for e in entities if e.tag in tags}
        for detector in types:
            for value in written[detector]:  # type: ignore[index]
                start = doc.text.find(value)
                names.add((start, start + len(value)))
        test = _items_of(doc.text, frozenset(names), doc.field_types.get(label))
        others = taken_by_others(doc, extraction.fields, label)
        have = {s.text for s in spans}
        added = []
        for span in spans:
            window = extraction.windows[span.window]
            for start, end in siblings(doc.text, span.start, span.end, test):
                text = doc.text[start:end]
                if text in have or not window.start <= start < end <= window.end:
                    continue
                if claimed(text, label_kind(doc, label), others):
                    continue
                have.add(text)
                item = msgspec.structs.replace(span, text=text, start=start, end=end, margin=0.0, normalised=None)
                added.append(normalised(item, doc.field_types.get(label)))
                extraction.reasons.append(
                    ReviewReason(
                        code=ReviewCode.UNCLAIMED_VALUE,
                        detail=f"the text lists {text!r} beside {span.text!r}: added",
                        label=label,
                        value=text,
                    )
                )
        extraction.fields[label] = [*spans, *added]


def _items_of(text: str, names: frozenset[tuple[int, int]], kind: str | None) -> Test:
    """The list walk's test for a label whose values are `names` (spans of entities of its type)."""

    def test(start: int, end: int, right: bool) -> tuple[int, int] | None:
        if start >= end:
            return None
        if (start, end) in names:
            return start, end
        # An item running on past its value (中金资本跟投), or a clause before it (先后就读于华东政法大学):
        # the value is the name at the item's edge, and the list ends there.
        inside = [n for n in names if (n[0] == start and n[1] < end if right else n[1] == end and n[0] > start)]
        # Not a part of a longer Latin name (Müller of Dr. Anna Müller).
        inside = [n for n in inside if not _LATIN_BEFORE.search(text, 0, n[0]) and not _LATIN_AFTER.match(text, n[1])]
        if not right and inside:
            return max(inside, key=lambda n: n[1] - n[0])
        # A whole organisation's name LAC splits (西门子（中国）有限公司).
        if kind == "organisation" and matches("organisation", text[start:end]):
            return start, end
        return max(inside, key=lambda n: n[1] - n[0]) if inside else None

    return test


_LATIN_BEFORE = re.compile(r"[A-Za-z.] $")
_LATIN_AFTER = re.compile(r" [A-Za-z]")
