"""The gate's cross-checks: evidence from the source text itself, independent of the model's confidence.

A confident `None` or a confident truncation passes the confidence and entropy gates by
construction; these checks look at the text instead (README "The gate"):

- `value_boundary` (per value, in `value_problem`, so the validation loop re-decodes it first): a
  name-like value must start and end on word edges of the source's jieba segmentation
  (model/answers/words.py), and a person's name must not leave its surname or last character beside it;
- `unclaimed_value` (per document): a phone, e-mail, date, amount or organisation the text writes
  (model/values/mentions.py), or a person's or organisation's name jieba tags (model/answers/words.py),
  that no label took, while a label of that type (a party, 甲方/乙方: either name) answered `None`;
- `unclaimed_value` from the cues of closed-vocabulary labels too (model/values/cues.py): a degree,
  an age, a sex beside its key or an age, a diagnosis after 确诊为, beside such a label answered `None`;
- `unclaimed_value` from LAC's entities too (`unclaimed_entities`, run by the lexicon backoff after the
  batch, model/answers/backoff.py): a person, organisation or place LAC tags beside a label of its type
  answered `None`;
- `empty_record` (per document): a document of substantial text whose labels are (nearly) all `None`.

The document checks see the whole document's fields: for a document read in windows they run on
the merged extraction (model/windows/engine.py), not on each window.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from model.answers.words import Words, words_of
from model.grammar.source import CHECKED_TYPES, WordEdges
from model.values.cues import CUED_LABELS, cued_values
from model.values.entities import Entity
from model.values.field_types import matches
from model.values.lexicon import organisation_suffixes, surnames
from model.values.mentions import MENTIONED_TYPES, mentions
from schemas.messages import Document, ReviewCode, ReviewReason, Span

# The reasons of the document checks: a window's are about the window, so a merge drops them and
# checks the merged record instead.
DOCUMENT_CODES = frozenset({ReviewCode.UNCLAIMED_VALUE, ReviewCode.EMPTY_RECORD})
# Types whose values are names, and the field sets' untyped labels that hold names all the same:
# the contract's parties (a person or a company) and the places.
NAME_TYPES = frozenset({"person", "organisation"})
NAME_LABELS = frozenset({"甲方", "乙方", "签约地点", "工作地点", "地点"})
# Labels whose value may be a person's name, for the person rules.
PARTY_LABELS = frozenset({"甲方", "乙方"})
# Types whose mentions a label answering `None` leaves unclaimed.
CLAIMABLE_TYPES = frozenset({*MENTIONED_TYPES, "person", "party"})
# A document this long (characters, spaces aside) with labels to fill has values to find.
SUBSTANTIAL_CHARS = 60
# At most this share of its labels answered (rounded down) is a near-empty record, from three labels up.
NEAR_EMPTY_SHARE = 1 / 6
NEAR_EMPTY_MIN_LABELS = 3


def name_like(doc: Document, label: str) -> bool:
    return edge_class(label, doc.field_types) is not None


# The word-edge classes of name-like labels: a name's edges, and a person's (the person rules too).
NAME_EDGES, PERSON_EDGES = "name_edges", "person_edges"


def edge_class(label: str, types: Mapping[str, str]) -> str | None:
    """Which word edges a label's values start and end on (None: any character's)."""
    kind = types.get(label)
    if kind in CHECKED_TYPES or (kind not in NAME_TYPES and label not in NAME_LABELS):
        return None  # a checked type's values are held to their type instead
    return PERSON_EDGES if kind == "person" or label in PARTY_LABELS else NAME_EDGES


def word_edges(text: str, labels: Sequence[str], types: Mapping[str, str]) -> WordEdges:
    """The document's table of where name-like values may start and end, in characters: the grammar
    (model/grammar/source.py, and the oracle) makes a value cut inside a word illegal by construction,
    by the rules `boundary_problem` checks (all but "only a surname", which is no position's)."""
    classes = {label: c for label in labels if (c := edge_class(label, types)) is not None}
    if not classes:
        return WordEdges()
    words = words_of(text)
    n = len(text)
    starts = [False] * (n + 1)
    ends = [False] * (n + 1)
    for edge in words.edges:
        if edge not in words.inside_names:
            starts[edge] = ends[edge] = True
    person_starts = [
        ok and not (s > 0 and s - 1 in words.name_heads and text[s - 1] in surnames()) for s, ok in enumerate(starts)
    ]
    person_ends = [ok and e not in words.name_tails for e, ok in enumerate(ends)]
    tables = {NAME_EDGES: (tuple(starts), tuple(ends)), PERSON_EDGES: (tuple(person_starts), tuple(person_ends))}
    return WordEdges(classes, {c: tables[c] for c in set(classes.values())})


def boundary_problem(doc: Document, label: str, value: str) -> str | None:
    """Why a name-like value reads as cut out of a longer word, or None when some occurrence of it
    in the source starts and ends on word edges (a value may be written more than once)."""
    if not name_like(doc, label):
        return None
    head = _head_of_organisation(doc, label, value)
    if head is not None:
        return head
    person = doc.field_types.get(label) == "person" or label in PARTY_LABELS
    words = words_of(doc.text)
    why = None
    start = doc.text.find(value)
    while start >= 0:
        why = _cut(doc.text, words, start, start + len(value), person)
        if why is None:
            return None
        start = doc.text.find(value, start + 1)
    return why


def _head_of_organisation(doc: Document, label: str, value: str) -> str | None:
    """An organisation's or party's value that is part of an organisation the text names, not its
    tail: 成都 for 成都锦江物流股份有限公司 is a word of its own to jieba, so the word edges let it
    through (it went to fields as the party; issue 31). The tail is allowed: the detector's mention
    may run left into the words before the name."""
    if doc.field_types.get(label) != "organisation" and label not in PARTY_LABELS:
        return None
    if value in words_of(doc.text).persons:
        return None  # a person's name before a loose mention (宋志远自愿加入青岛…有限公司)
    whole = next((m for m in mentions(doc.text)["organisation"] if value in m and not m.endswith(value)), None)
    return None if whole is None else f"part of the organisation {whole!r}"


def _cut(text: str, words: Words, start: int, end: int, person: bool) -> str | None:
    if start not in words.edges or start in words.inside_names:
        return f"starts inside the word around {text[max(start - 2, 0) : start + 2]!r}"
    if end not in words.edges or end in words.inside_names:
        return f"ends inside the word around {text[max(end - 2, 0) : end + 2]!r}"
    if not person:
        return None
    if text[start:end] in surnames():
        return f"only a surname, before {text[end : end + 2]!r}"
    if start > 0 and start - 1 in words.name_heads and text[start - 1] in surnames():
        return f"leaves off the surname {text[start - 1]!r} before it"
    if end in words.name_tails:
        return f"leaves off {text[end]!r} after it"
    return None


def document_reasons(doc: Document, fields: Mapping[str, Sequence[Span]]) -> list[ReviewReason]:
    """The document checks' reasons, from the record's fields (label -> its spans; absent or empty: None)."""
    if doc.task != "extract":
        return []
    return [*unclaimed_values(doc, fields), *empty_record(doc, fields)]


def unclaimed_values(doc: Document, fields: Mapping[str, Sequence[Span]]) -> list[ReviewReason]:
    taken = taken_values(doc, fields)
    empty_by_type: dict[str, list[str]] = {}
    for label in doc.labels:
        kind = doc.field_types.get(label) or ("party" if label in PARTY_LABELS else None)
        if kind in CLAIMABLE_TYPES and not fields.get(label):
            empty_by_type.setdefault(kind, []).append(label)
    reasons = []
    for kind, labels in empty_by_type.items():
        free = [m for m in typed_mentions(doc.text)[kind] if not claimed(m, kind, taken)]
        if free:
            reasons += [
                ReviewReason(
                    code=ReviewCode.UNCLAIMED_VALUE,
                    detail=f"the text writes the {kind} {free[0]!r} ({len(free)} unclaimed) and this label has none",
                    label=label,
                    value=free[0],
                )
                for label in labels
            ]
    for label in doc.labels:
        if label in CUED_LABELS and not fields.get(label):
            cued = [c.text for c in cued_values(doc.text, label) if not claimed(c.text, None, taken)]
            if cued:
                reasons.append(
                    ReviewReason(
                        code=ReviewCode.UNCLAIMED_VALUE,
                        detail=f"the text writes {cued[0]!r} ({len(cued)} spellings unclaimed) and this label has none",
                        label=label,
                        value=cued[0],
                    )
                )
    return reasons


# LAC's entity tags the cross-check reads, per label type (dates: the detectors' alone, LAC's TIME
# holds vague times such as 上午 that no date label wants).
ENTITY_CHECKS = {"person": ("PER",), "organisation": ("ORG",), "party": ("PER", "ORG"), "place": ("LOC",)}
PLACE_LABELS = NAME_LABELS - PARTY_LABELS
# A place inside an address (地址：广西壮族自治区…) is where a party lives, not the label's place: the
# generated contracts leave 签约地点 empty beside their parties' addresses.
_ADDRESS_CUES = ("地址", "住址", "住所", "通讯", "户籍")
_CLAUSE_ENDS = "\n。；;，,"


def in_address(text: str, start: int) -> bool:
    """Whether the clause around `start` (up to the nearest separator either side) reads as an address."""
    left = max(text.rfind(c, 0, start) for c in _CLAUSE_ENDS)
    return any(cue in text[left + 1 : start] for cue in _ADDRESS_CUES)


def unclaimed_entities(
    doc: Document, fields: Mapping[str, Sequence[Span]], entities: Sequence[Entity], reasons: Sequence[ReviewReason]
) -> list[ReviewReason]:
    """`unclaimed_value` from LAC's entities (model/values/entities.py): a person, organisation or place
    it tags that no label took, beside a label of that type answered `None` (the labels the older
    check already flagged aside)."""
    if doc.task != "extract":
        return []
    flagged = {r.label for r in reasons if r.code == ReviewCode.UNCLAIMED_VALUE}
    taken = taken_values(doc, fields)
    out = []
    for label in doc.labels:
        kind = doc.field_types.get(label) or (
            "party" if label in PARTY_LABELS else "place" if label in PLACE_LABELS else None
        )
        if kind not in ENTITY_CHECKS or fields.get(label) or label in flagged:
            continue
        free = list(
            dict.fromkeys(
                e.text
                for e in entities
                if e.tag in ENTITY_CHECKS[kind]
                and not claimed(e.text, kind, taken)
                and not (e.tag == "LOC" and in_address(doc.text, e.start))
                and not (e.tag == "ORG" and e.text in organisation_suffixes())
            )
        )
        if free:
            out.append(
                ReviewReason(
                    code=ReviewCode.UNCLAIMED_VALUE,
                    detail=f"LAC tags the {kind} {free[0]!r} ({len(free)} unclaimed) and this label has none",
                    label=label,
                    value=free[0],
                )
            )
    return out


# Kinds whose values may name one another: a contract's party is a person or an organisation.
_NAMES = frozenset({"person", "organisation", "party"})


def label_kind(doc: Document, label: str) -> str | None:
    """The kind of value a label holds: its type, or party / place for the untyped name labels."""
    kind = doc.field_types.get(label)
    return kind or ("party" if label in PARTY_LABELS else "place" if label in PLACE_LABELS else None)


def taken_values(doc: Document, fields: Mapping[str, Sequence[Span]]) -> list[tuple[str, str | None]]:
    """Every value the record holds, with its label's kind; not one its label's type refuses, which
    names nothing of that type (医院名称's 海 燕 is no claim on the doctor 龙 海 燕)."""
    return [
        (span.text, label_kind(doc, label))
        for label, spans in fields.items()
        for span in spans
        if (kind := doc.field_types.get(label)) is None or matches(kind, span.text)
    ]


def taken_by_others(doc: Document, fields: Mapping[str, Sequence[Span]], label: str) -> list[tuple[str, str | None]]:
    """`taken_values` of every label but `label`: what its own values were cannot claim what it may become."""
    return taken_values(doc, {other: spans for other, spans in fields.items() if other != label})


def claimed(mention: str, kind: str | None, taken: Sequence[tuple[str, str | None]]) -> bool:
    """Whether a label took the mention: a value holds it, or is part of it and of its kind (a date
    inside a longer date). A value of another kind inside it claims nothing: the place 厦门 that
    工作地点 took leaves 厦门鹭岛餐饮管理有限公司 unclaimed (it did, and a job ad with its company
    answered None went to fields; issue 31)."""
    return any(mention in text or (text in mention and _part_claims(mention, kind, text, k)) for text, k in taken)


def _part_claims(mention: str, kind: str | None, part: str, part_kind: str | None) -> bool:
    """A name's part claims it only as its tail: an organisation detector's mention may run left into
    the words before the name (委托方杭州…有限公司), but a party answered 成都 for 成都锦江物流股份有限公司
    is a name cut short (it went to fields; issue 31)."""
    if {kind, part_kind} <= _NAMES:
        return mention.endswith(part)
    # Of another kind, it claims a mention that is little more than itself: LAC's 永安市） is the
    # place 永安市, not a second organisation (a generated news item went to review for it).
    # Untyped labels are no kind in common: the degree 高中 that 学历要求 took is no part of the job
    # title 高中数学教师 (it left 职位名称 no candidate).
    return (kind == part_kind and kind is not None) or len(re.sub(r"\W", "", mention.replace(part, ""))) < 2


def typed_mentions(text: str) -> dict[str, tuple[str, ...]]:
    """The text's typed values (model/values/mentions.py) and the names jieba's tagger found."""
    found: dict[str, tuple[str, ...]] = dict(mentions(text))
    words = words_of(text)
    found["organisation"] = tuple(dict.fromkeys((*found["organisation"], *words.organisations)))
    # A "name" inside an organisation's (云栖 in 杭州云栖数智科技有限公司) is the organisation's word;
    # jieba's names, then the mixed-script ones it splits (Kevin 刘).
    persons = (*words.persons, *found["person"])
    found["person"] = tuple(dict.fromkeys(p for p in persons if not any(p in o for o in found["organisation"])))
    # A contract's party is a person or a company.
    found["party"] = (*found["person"], *found["organisation"])
    return found


def empty_record(doc: Document, fields: Mapping[str, Sequence[Span]]) -> list[ReviewReason]:
    labels = len(doc.labels)
    answered = sum(1 for label in doc.labels if fields.get(label))
    substantial = len("".join(doc.text.split())) >= SUBSTANTIAL_CHARS
    if not substantial or labels < NEAR_EMPTY_MIN_LABELS or answered > int(labels * NEAR_EMPTY_SHARE):
        return []
    return [
        ReviewReason(
            code=ReviewCode.EMPTY_RECORD,
            detail=f"{answered} of {labels} labels have a value in a document of {len(doc.text)} characters",
        )
    ]
