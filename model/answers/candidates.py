"""What the lexicon backoff offers a label (model/answers/backoff.py), and the values it corrects
before asking: which labels are open, each one's candidates in the text, and the values the model cut
short.

A label is open when answered `None`, or only with values not of its type. Its candidates come from
its sources (LAC's entities of its type, the typed detectors' mentions, the cues of a closed-vocabulary
label), each once, in order of appearance, none that another label took, and of those the ones in the
label's role where the text shows it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import msgspec

from model.answers.checks import PARTY_LABELS, PLACE_LABELS, claimed, in_address, label_kind, taken_by_others
from model.answers.parties import keyed_value
from model.answers.validate import Extraction, normalised
from model.values.addresses import address_end, english_addresses
from model.values.cues import CUED_LABELS, cued_values
from model.values.entities import Entity, EntityTag
from model.values.field_types import matches
from model.values.lexicon import ENGLISH_LEGAL_FORMS, organisation_suffixes
from model.values.mentions import mentions
from model.values.width import inner_space
from schemas.messages import Candidate, Document, ReviewCode, ReviewReason, Span

# A label's candidates, at most this many, in order of appearance: a long document's tail adds cost
# and rarely the value.
MAX_CANDIDATES = 8
# Per field type: LAC's entity tags and the typed detectors whose values are its candidates.
SOURCES: dict[str, tuple[tuple[EntityTag, ...], tuple[str, ...]]] = {
    "person": (("PER",), ("person",)),
    "organisation": (("ORG",), ("organisation",)),
    "date": (("TIME",), ("date",)),
    "phone": ((), ("phone",)),
    "email": ((), ("email",)),
    "amount": ((), ("amount",)),
    "salary": ((), ("salary",)),
}


def sources(doc: Document, label: str) -> tuple[tuple[EntityTag, ...], tuple[str, ...]]:
    """The entity tags and detector types a label's candidates come from (none: no backoff)."""
    kind = doc.field_types.get(label)
    if kind in SOURCES:
        return SOURCES[kind]
    if label in PARTY_LABELS:
        return ("PER", "ORG"), ("person", "organisation")
    if label in PLACE_LABELS:
        return ("LOC",), ()
    return (), ()


def open_labels(doc: Document, extraction: Extraction) -> list[str]:
    """The labels the backoff could fill: answered `None`, or only with values not of their type."""
    if doc.task != "extract":
        return []
    wrong = mistyped(extraction)
    return [
        label
        for label in doc.labels
        if (not extraction.fields.get(label) or label in wrong)
        and (any(sources(doc, label)) or (label in CUED_LABELS and bool(cued_values(doc.text, label))))
    ]


def mistyped(extraction: Extraction) -> set[str]:
    """Labels whose every value failed its type (姓名 郑, 医院名称 天佑 男): the model named no value of
    the type, as good as `None` to the backoff (the values stay in the reasons that name them)."""
    wrong: dict[str, set[str]] = {}
    for r in extraction.reasons:
        if r.code == ReviewCode.TYPE_MISMATCH and r.label is not None:
            wrong.setdefault(r.label, set()).add(r.value or "")
    return {label for label, values in wrong.items() if {s.text for s in extraction.fields.get(label, [])} <= values}


def offered(
    doc: Document, label: str, entities: Sequence[Entity], taken: Sequence[tuple[str, str | None]]
) -> list[Candidate]:
    """A label's candidates: its sources' values that no label took, each once, in order of appearance."""
    tags, types = sources(doc, label)
    found = [Candidate(text=e.text, start=e.start, end=e.end, score=0.0, source=f"lac:{e.tag}") for e in entities]
    # A bare suffix (公司) LAC tags as an organisation names none, nor does one character (a surname
    # alone, 方 beside Linda 卢; 页 of a page footer), nor a sum (五亿元 tagged an organisation): the
    # model, made to choose, took such a part.
    found = [
        c
        for c, e in zip(found, entities, strict=True)
        if e.tag in tags
        and len(e.text.strip()) > 1
        and not (e.tag == "ORG" and e.text in organisation_suffixes())
        and not (e.tag != "TIME" and matches("amount", e.text))
    ]
    written = mentions(doc.text)
    for kind in types:
        for value in written[kind]:  # type: ignore[index]
            start = doc.text.find(value)
            found.append(Candidate(text=value, start=start, end=start + len(value), score=0.0, source=kind))
    found += [
        Candidate(text=c.text, start=c.start, end=c.end, score=0.0, source="cue") for c in cued_values(doc.text, label)
    ]
    if label in PLACE_LABELS:
        # A place that runs on into a street address offers the address too (`whole_name` prefers it).
        addresses = [
            Candidate(text=doc.text[c.start : end], start=c.start, end=end, score=0.0, source="address")
            for c in found
            if (end := address_end(doc.text, c.start)) and end > c.end
        ]
        # The whole addresses only: a part of one (雁塔区… in 西安市雁塔区…) would crowd the candidates.
        found += [a for a in addresses if not any(b.start < a.start and a.end <= b.end for b in addresses)]
        found += [
            Candidate(text=doc.text[start:end], start=start, end=end, score=0.0, source="address")
            for start, end in english_addresses(doc.text)
        ]
    unique: dict[str, Candidate] = {}
    for candidate in sorted(found, key=lambda c: (c.start, -c.end)):
        text = candidate.text.strip()
        if text and text not in unique and not claimed(text, label_kind(doc, label), taken):
            unique[text] = candidate
    candidates = list(unique.values())
    if (value := keyed_value(doc, label)) is not None:
        # The text's key names the label's value; the other names in the text play other roles.
        candidates = [c for c in candidates if c.text == value] or candidates
    if label == "学历":
        # A person's degree is their highest: a résumé or a reference names each one taken (本科、硕士、博士).
        top = min((r for c in candidates if (r := degree_rank(c.text)) is not None), default=None)
        candidates = [c for c in candidates if degree_rank(c.text) in (top, None)]
    if doc.field_types.get(label) == "person":
        # A kinship word LAC tags a person (二叔) is no name: where names are offered, it is not. A
        # Latin given name alone stays (Leo of Leo 蒋: the model's pick of it takes the whole name).
        named = [c for c in candidates if matches("person", c.text) or not _HAN_ONLY.fullmatch(c.text)]
        candidates = named or candidates
    return in_role(doc.text, label, candidates)[:MAX_CANDIDATES]


_DEGREES = (
    ("博士", "phd", "ph.d", "doctor"),
    ("硕士", "研究生", "master", "mba"),
    ("本科", "学士", "bachelor"),
    ("大专", "专科"),
    ("中专", "高中"),
    ("初中",),
)


def degree_rank(text: str) -> int | None:
    """0 for a doctorate, 1 for a master's, and so on down; None when the text names no degree."""
    lower = text.lower()
    return next((rank for rank, words in enumerate(_DEGREES) if any(w in lower for w in words)), None)


# Labels whose value plays a role some candidates visibly do not: a school is where a person studied,
# not (as a rule) where they work; a person the text calls a doctor is no patient. Where the text
# gives a candidate the role and another not, the backoff offers the one that fits (the shipped model
# picked the university for 工作单位 and the doctor for 患者姓名, the first in the text, again and again).
_SCHOOL = re.compile(r"(?:大学|学院|学校|中学|小学|研究生院|University|College|School)$", re.IGNORECASE)
_DOCTOR = re.compile(r"(?:医生|医师|主任|大夫|接诊|主治|Dr\.?)\s*[:：]?\s*$", re.IGNORECASE)
_DOCTOR_AFTER = re.compile(r"^\s*(?:医生|医师|主任|大夫)")


def _school(text: str, c: Candidate) -> bool:
    return bool(_SCHOOL.search(c.text))


def _doctor(text: str, c: Candidate) -> bool:
    return bool(_DOCTOR.search(text[max(0, c.start - 6) : c.start]) or _DOCTOR_AFTER.match(text[c.end : c.end + 3]))


# A news outlet publishes the item; the organisations it reports on are others (the shipped model
# took 辽宁日报 for 组织机构 beside 鞍山钢铁集团).
_OUTLET = re.compile(r"(?:日报|晚报|早报|时报|商报|新闻网|(?<!电)网|电视台|广播电台|通讯社|新闻社|杂志|周刊)$")


def _outlet(text: str, c: Candidate) -> bool:
    return bool(_OUTLET.search(c.text))


# A contract's first party is, as a rule, the organisation: the employer, the buyer, the client (the
# shipped model, made to choose, took the HR contact or the signatory named first: 刘倩, 欧阳子健).
def _organisation(text: str, c: Candidate) -> bool:
    return matches("organisation", c.text)


ROLES: dict[str, tuple[Callable[[str, Candidate], bool], bool]] = {
    "甲方": (_organisation, True),
    "毕业院校": (_school, True),
    "工作单位": (_school, False),
    "发布机构": (_outlet, True),
    "组织机构": (_outlet, False),
    "主治医师": (_doctor, True),
    "患者姓名": (_doctor, False),
}


def in_role(text: str, label: str, candidates: list[Candidate]) -> list[Candidate]:
    """The candidates that fit the label's role, where some do and some do not; else all of them."""
    if label not in ROLES:
        return candidates
    test, wanted = ROLES[label]
    fitting = [c for c in candidates if test(text, c) == wanted]
    return fitting if fitting and len(fitting) < len(candidates) else candidates


_HAN_ONLY = re.compile(r"[\u4e00-\u9fff]+")


# A name ending in a company's legal form is whole: LAC's organisation may run on past it
# (鸿睿思博传媒有限公司诚聘测试工程师 in a generated job ad, whose company went wrong, extended).
_WHOLE_NAME_ENDS = ("公司", *ENGLISH_LEGAL_FORMS)


def extend_cut_values(doc: Document, extraction: Extraction, entities: Sequence[Entity]) -> None:
    """Values the text continues into a longer value of the label's sources (LAC's entities of its
    type, its typed detector's mentions) from the same character: the model stopped early (华南理工大
    for 华南理工大学, 韦秀 for 韦秀兰, 郑州大学 for 郑州大学第一附属医院), or, for a sum, a date or a
    phone, a mention around it (`WHOLE_TYPES`). Each becomes the longest such value, beside a
    `value_boundary` reason naming what it was; the record goes to review.

    Not where the continuation of a LAC entity starts with a space or a line break (a label's line
    after it: a typed detector's mention may hold such a break, 2023年 7月 1日), where
    another label's value claims the longer one (a party's name before a company: 宋志远自愿加入青岛…),
    or, for a typed label, where the longer one does not read as the type (2022年3月1日起). A place
    is extended only into a street address (model/values/addresses.py), not into a longer place: a
    place nests in a longer one (北京 in 北京市朝阳区) and either may be the value (a long generated
    news item's 地点 北京 went wrong, extended)."""
    for label in doc.labels:
        tags, types = sources(doc, label)
        spans = extraction.fields.get(label)
        if not spans or not (tags or types):
            continue
        kind = doc.field_types.get(label)
        others = taken_by_others(doc, extraction.fields, label)
        if label in PLACE_LABELS:
            longer = [
                (at, end, "address") for s in spans for at in _places(doc.text, s) if (end := address_end(doc.text, at))
            ]
        else:
            longer = [(e.start, e.end, f"lac:{e.tag}") for e in entities if e.tag in tags]
            written = mentions(doc.text)
            for detector in types:
                for value in written[detector]:  # type: ignore[index]
                    start = doc.text.find(value)
                    while start >= 0:
                        longer.append((start, start + len(value), detector))
                        start = doc.text.find(value, start + 1)
        fixed = []
        for span in spans:
            window = extraction.windows[span.window]
            ends = [
                (start == span.start, end, start, source)
                for start, end, source in longer
                # The span's own place, or, for an address, the same place written again (see `_places`).
                if (start == span.start or (source == "address" and doc.text.startswith(span.text, start)))
                and window.start <= start
                and start + len(span.text) < end <= window.end
                # A detector's mention may span OCR's breaks (2023年 7月 1日); LAC's entity stops at one,
                # unless it is read across letter-spacing (韦秀 兰).
                and (
                    source in (*types, "address")
                    or not doc.text[start + len(span.text)].isspace()
                    or inner_space(doc.text, start + len(span.text))
                )
                and not claimed(doc.text[start:end], label_kind(doc, label), others)
                and (kind is None or matches(kind, doc.text[start:end]))
            ]
            # A sum, date or phone the model took the tail of (陆万元整 of 人民币叁拾\n陆万元整, 肆万伍仟元整
            # of 美元肆万伍仟元整): the detector's mention around it is the whole value.
            ends += [
                (False, end, start, source)
                for start, end, source in longer
                if source in types
                and source in WHOLE_TYPES
                and window.start <= start < span.start
                and span.end <= end <= window.end
                and not claimed(doc.text[start:end], label_kind(doc, label), others)
                and matches(source, doc.text[start:end])
            ]
            if not ends or span.text.endswith(_WHOLE_NAME_ENDS):
                fixed.append(span)
                continue
            _, end, start, source = max(ends)
            text = doc.text[start:end]
            fixed.append(
                normalised(
                    msgspec.structs.replace(span, text=text, start=start, end=end, margin=0.0, normalised=None), kind
                )
            )
            extraction.reasons.append(
                ReviewReason(
                    code=ReviewCode.VALUE_BOUNDARY,
                    detail=f"the text continues {span.text!r} into {text!r} ({source}): extended to it",
                    label=label,
                    value=text,
                )
            )
        extraction.fields[label] = fixed


# Typed detectors whose mention around a value is the value written whole.
WHOLE_TYPES = frozenset({"amount", "date", "phone"})
# Detectors whose value holds the parts LAC splits it into; a pick of a part takes the whole.
WHOLE_SOURCES = frozenset({"person", "date", "address", "organisation"})


def _places(text: str, span: Span) -> list[int]:
    """Where a place value may stand: its own span, then the same name written again outside a
    party's address line (签订地点：天津市河西区友谊路35号… after 甲方 天津市河西区教育装备中心 and its
    地址 line); the model's span points at the first."""
    again = [m.start() for m in re.finditer(re.escape(span.text), text) if m.start() != span.start]
    return [span.start, *(at for at in again if not in_address(text, at))]


def whole_name(candidates: Sequence[Candidate], pick: int) -> int:
    """The candidate to take for the model's `pick`: the shortest detector's value around it, where one
    offers it; else the pick itself. LAC splits mixed-script names (Tony 林 for Tony, Sophie 李 for 李),
    a date broken over a line (2023年 for 2023年\n5月18日) and a street address (广州市 for
    广州市天河区…3205室), and the model, made to choose, mostly took the part (with names alone, the
    shipped model found 99 of the mixed corpus's 241 values, not 93)."""
    chosen = candidates[pick]
    around = [
        i
        for i, c in enumerate(candidates)
        if c.source in WHOLE_SOURCES
        and c.start <= chosen.start
        and chosen.end <= c.end
        and c.text != chosen.text
        # An organisation's mention may run left into the words before the name (兹有苏州恒润…有限公司):
        # it takes a pick that begins it (华芯 of 华芯 SemiTech 集团), no other.
        and (c.source != "organisation" or c.start == chosen.start)
    ]
    return min(around, key=lambda i: len(candidates[i].text)) if around else pick
