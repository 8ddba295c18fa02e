"""Values widened by what the text writes around them, in a record that goes to review anyway:
- values listed beside one: where a label takes several values and the text lists them
  (签约方：中铁建工集团、西门子（中国）有限公司、雄安集团), the model answers one item and the others
  are added from the list, each an entity of the label's type;
- a job's place with its district (厦门思明区, 北京海淀): the model answered the city;
- a cued value the model's value begins (慢性阻塞性肺疾病 of 慢性阻塞性肺疾病急性加重期, 电气 of
  电气自动化工程师), and the other items of a cue's list (出院诊断：1. … 2. … 3. …).

A record bound for fields is left as the model gave it: these are the text's structure read by a
rule, and the person reviewing sees each with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from model.answers.candidates import sources
from model.answers.checks import claimed, label_kind, taken_by_others
from model.answers.validate import Extraction, normalised
from model.values.addresses import district_end
from model.values.cues import CUED_LABELS, ITEM_GAP, Cued, cued_values
from model.values.entities import Entity
from model.values.field_types import matches
from model.values.lists import Test, siblings
from model.values.mentions import mentions
from schemas.field_sets import single_value_labels
from schemas.messages import Document, ReviewCode, ReviewReason, Span

# Labels whose place is as precise as the text writes it: where a job is, a city and its district
# (the hand-written corpora's writers marked them whole). A news item's 地点 is not one: it is often
# the city alone beside a longer place (a generated item's 北京 went wrong extended to 北京市朝阳区).
DISTRICT_LABELS = frozenset({"工作地点"})


def widen(doc: Document, extraction: Extraction, entities: Sequence[Entity]) -> None:
    """Each of the module's readings, in a record that goes to review (else nothing changes)."""
    if doc.task != "extract" or not extraction.needs_review:
        return
    add_districts(doc, extraction, entities)
    add_cued(doc, extraction)
    add_listed(doc, extraction, entities)


def add_districts(doc: Document, extraction: Extraction, entities: Sequence[Entity]) -> None:
    """A place of a `DISTRICT_LABELS` label extended into the districts the text writes after it."""
    if doc.task != "extract" or not extraction.needs_review:
        return
    places = [(e.start, e.end, e.text) for e in entities if e.tag == "LOC"]
    for label in DISTRICT_LABELS & set(doc.labels):
        others = taken_by_others(doc, extraction.fields, label)
        fixed = []
        for span in extraction.fields.get(label, []):
            window = extraction.windows[span.window]
            # The model's span is the name's first occurrence, often in the company's name (厦门鹭岛餐饮…).
            found = [
                (at, end)
                for m in re.finditer(re.escape(span.text), doc.text[window.start : window.end])
                if (end := district_end(places, (at := window.start + m.start()), at + len(span.text)))
                and end <= window.end
                and not claimed(doc.text[at:end], label_kind(doc, label), others)
            ]
            if not found:
                fixed.append(span)
                continue
            start, end = found[0]
            why = f"the text writes {span.text!r} on into its district {doc.text[start:end]!r}: extended to it"
            fixed.append(_moved(doc, extraction, label, span, start, end, ReviewCode.VALUE_BOUNDARY, why))
        if fixed:
            extraction.fields[label] = fixed


def _moved(
    doc: Document, extraction: Extraction, label: str, like: Span, start: int, end: int, code: ReviewCode, why: str
) -> Span:
    """`like` moved to text[start:end], with its normal form read again and a margin of 0 (no decode
    step chose it); the reason saying why goes on the record."""
    text = doc.text[start:end]
    extraction.reasons.append(ReviewReason(code=code, detail=why, label=label, value=text))
    span = msgspec.structs.replace(like, text=text, start=start, end=end, margin=0.0, normalised=None)
    return normalised(span, doc.field_types.get(label))


# Closed-vocabulary labels, whose cued spellings nest by design (本科 in 本科及以上学历): no tail.
_NESTED = frozenset({"学历", "学历要求", "性别", "年龄"})


def add_cued(doc: Document, extraction: Extraction) -> None:
    """An untyped label's value extended into the cued value it begins, and a label that takes several
    values given the other items of a cue's list one of its values is."""
    if doc.task != "extract" or not extraction.needs_review:
        return
    single = single_value_labels(doc.field_set)
    for label in doc.labels:
        spans = extraction.fields.get(label)
        if not spans or label not in CUED_LABELS or label in _NESTED or doc.field_types.get(label):
            continue
        cued = sorted(cued_values(doc.text, label), key=lambda c: (c.start, -c.end))
        others = taken_by_others(doc, extraction.fields, label)
        fixed = []
        for span in spans:
            window = extraction.windows[span.window]
            longer = [
                c
                for c in cued
                if c.text.startswith(span.text)
                and len(c.text) > len(span.text)
                and window.start <= c.start < c.end <= window.end
                and not claimed(c.text, label_kind(doc, label), others)
            ]
            if not longer:
                fixed.append(span)
                continue
            c = longer[0]
            why = f"the text continues {span.text!r} into {c.text!r} (cue): extended to it"
            fixed.append(_moved(doc, extraction, label, span, c.start, c.end, ReviewCode.VALUE_BOUNDARY, why))
        extraction.fields[label] = fixed
        if label in single:
            continue
        have = {s.text for s in fixed}
        for group in _lists(doc.text, cued):
            if have & {c.text for c in group}:
                for c in group:
                    if c.text in have or claimed(c.text, label_kind(doc, label), others):
                        continue
                    have.add(c.text)
                    why = f"the text lists {c.text!r} with {sorted(have & {g.text for g in group})}: added"
                    item = _moved(doc, extraction, label, fixed[0], c.start, c.end, ReviewCode.UNCLAIMED_VALUE, why)
                    extraction.fields[label].append(item)


def _lists(text: str, cued: Sequence[Cued]) -> list[list[Cued]]:
    """The cued values that stand one after another with only a list's marks between (；, 、, the
    next numbered line): the items of one list, two or more."""
    groups: list[list[Cued]] = []
    for c in cued:
        if groups and groups[-1][-1].end <= c.start and re.fullmatch(ITEM_GAP, text[groups[-1][-1].end : c.start]):
            groups[-1].append(c)
        else:
            groups.append([c])
    return [g for g in groups if len(g) > 1]


def add_listed(doc: Document, extraction: Extraction, entities: Sequence[Entity]) -> None:
    """Adds to `extraction` the items listed beside each value of a label that takes several."""
    if doc.task != "extract" or not extraction.needs_review:
        return
    single = single_value_labels(doc.field_set)
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
                why = f"the text lists {text!r} beside {span.text!r}: added"
                added.append(_moved(doc, extraction, label, span, start, end, ReviewCode.UNCLAIMED_VALUE, why))
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
        # Not a part of a longer Latin name (Müller of Dr. Anna Müller), nor of a longer name that
        # another of them continues (西安市 of 西安市未央区…: the item is a place, not 西安市 and a verb).
        starts, ends = {n[0] for n in names}, {n[1] for n in names}
        inside = [
            n
            for n in inside
            if not _LATIN_BEFORE.search(text, max(0, n[0] - 2), n[0])
            and not _LATIN_AFTER.match(text, n[1])
            and (n[1] not in starts if right else n[0] not in ends)
        ]
        if not right and inside:
            return max(inside, key=lambda n: n[1] - n[0])
        # A whole organisation's name LAC splits (西门子（中国）有限公司).
        if kind == "organisation" and matches("organisation", text[start:end]):
            return start, end
        # An English name among organisations LAC does not tag (Schneider Electric, BYD and Uber
        # announced…): capitalised words, the whole item or, going right, the words it starts with
        # up to a space or a Chinese character (Siemens Energy当日…).
        latin = _LATIN_ORGANISATION.match(text, start, end) if kind == "organisation" else None
        if latin and (latin.end() == end or (right and not inside and _RUNS_ON.match(text, latin.end()))):
            return start, latin.end()
        return max(inside, key=lambda n: n[1] - n[0]) if inside else None

    return test


_LATIN_ORGANISATION = re.compile(r"[A-Z][A-Za-z0-9&'.-]*(?: [A-Z][A-Za-z0-9&'.-]*){0,3}(?![A-Za-z0-9&'.-])")
_RUNS_ON = re.compile(r" |[\u4e00-\u9fff]")
# A title before a name is no part of it (Dr. Anna Müller).
_LATIN_BEFORE = re.compile(r"(?:[A-Za-z]|(?<!Dr)(?<!Mr)(?<!Ms)(?<!Mrs)(?<!Prof)\.) $")
_LATIN_AFTER = re.compile(r" [A-Za-z]")
