"""The peers a user would try first for names: a lexicon NER (jieba's POS tagger) and Baidu's LAC, as `Engine`s.

jieba tags words from its dictionary and, for unknown words, by its HMM: `nr*` person, `ns*` place,
`nt*` organisation. A label of a name-like type takes the entities of that type in the order they
are first seen: the first person goes to the first single-value person label asked (患者姓名), the
next to the next (主治医师); a label that holds several values (人物, 组织机构) takes every entity of
its type the single-value labels left. Labels of other types (dates, phones, amounts, free text)
are answered by the regex baseline's rules (ops/eval/baseline.py), so the two columns differ only in
how names are found: cues and shapes against a segmenter's dictionary.

The LAC script (`LacEngine`) is the same with LAC's PER/LOC/ORG entities (model/values/entities.py)
in place of jieba's tags: what a Chinese NLP engineer would write in an afternoon.

Like the regex baseline, every value is a span of the text and nothing is ever sent to review.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cache

from model.values.entities import finder
from ops.eval.baseline import RuleEngine, find_values
from schemas.field_sets import SINGLE_VALUE_LABELS
from schemas.messages import Document

# jieba's tag prefixes, and the entity type each stands for.
TAGS = {"nr": "person", "ns": "place", "nt": "organisation"}
LAC_TAGS = {"PER": "person", "LOC": "place", "ORG": "organisation"}
# The field sets' name-like labels; 甲方 and 乙方 are untyped in the field sets (either may be a
# company or a person) and a user would map them as the usual case is: a company hires a person.
ENTITY_LABELS = {
    "甲方": "organisation", "乙方": "person", "签约地点": "place",
    "姓名": "person", "毕业院校": "organisation", "工作单位": "organisation",
    "公司名称": "organisation", "工作地点": "place",
    "发布机构": "organisation", "人物": "person", "组织机构": "organisation", "地点": "place",
    "患者姓名": "person", "主治医师": "person", "医院名称": "organisation",
}  # fmt: skip


@cache
def _tagger():
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)  # its dictionary-loading chatter on stderr
    return jieba.posseg


def entities(text: str) -> list[tuple[str, int, int]]:
    """(entity type, start, end) of every word jieba tags as a person, place or organisation."""
    found, position = [], 0
    for pair in _tagger().cut(text):
        start, position = position, position + len(pair.word)
        kind = next((k for tag, k in TAGS.items() if pair.flag.startswith(tag)), None)
        if kind is not None:
            found.append((kind, start, position))
    return found


def entity_type(doc: Document, label: str) -> str | None:
    kind = doc.field_types.get(label)
    return ENTITY_LABELS.get(label) or (kind if kind in ("person", "organisation") else None)


def lac_entities(text: str) -> list[tuple[str, int, int]]:
    """(entity type, start, end) of every person, place and organisation Baidu's LAC tags."""
    return [(LAC_TAGS[e.tag], e.start, e.end) for e in finder()(text) if e.tag in LAC_TAGS]


def find_all(
    doc: Document, tagged: Callable[[str], list[tuple[str, int, int]]] = entities
) -> dict[str, list[tuple[int, int]]]:
    """Every asked label's (start, end) spans: names (from `tagged`) by first-seen order, the rest by the rules."""
    found: dict[str, list[tuple[int, int]]] = {}
    single = SINGLE_VALUE_LABELS.get(doc.field_set or "", frozenset(doc.labels))
    pending = {kind: [(s, e) for k, s, e in tagged(doc.text) if k == kind] for kind in TAGS.values()}
    # The same name twice is one entity: a role takes the next *new* one.
    for kind, spans in pending.items():
        seen, unique = set(), []
        for start, end in spans:
            if doc.text[start:end] not in seen:
                seen.add(doc.text[start:end])
                unique.append((start, end))
        pending[kind] = unique
    named = [label for label in doc.labels if entity_type(doc, label)]
    for label in (label for label in named if label in single):
        queue = pending[entity_type(doc, label)]  # type: ignore[index]
        found[label] = [queue.pop(0)] if queue else []
    for label in (label for label in named if label not in single):
        found[label] = list(pending[entity_type(doc, label)])  # type: ignore[index]
    for label in doc.labels:
        if label not in found:
            found[label] = find_values(doc.text, label)
    return found


class LexiconEngine(RuleEngine):
    """jieba's POS tags for names, the regex baseline's rules for everything else."""

    name = "lexicon-ner-baseline"

    def find(self, doc: Document) -> dict[str, list[tuple[int, int]]]:
        return find_all(doc)


class LacEngine(RuleEngine):
    """The issue's "60-line LAC script": LAC's entities for names, the regex baseline's rules for the rest."""

    name = "lac-script-baseline"

    def find(self, doc: Document) -> dict[str, list[tuple[int, int]]]:
        return find_all(doc, lac_entities)
