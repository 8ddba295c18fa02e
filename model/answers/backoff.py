"""The lexicon backoff: where the model answered `None` beside a value of the label's type, a
pretrained analyser's entities become the candidates the model must choose among.

After a batch is decoded and merged (model/windows/engine.py calls `Backoff` once per batch, off the
decode loop), documents with a typed or name-like label left empty are read by Baidu's LAC
(model/values/entities.py), batched:

1. the cross-check: a person, organisation or place LAC tags that no label took, beside a label of
   that type answered `None`, is an `unclaimed_value` (model/answers/checks.py), as the typed
   detectors' phones, dates and amounts already are;
2. for each such label of a document going to review (that check, or the older ones, or a near-empty
   record), its candidates (LAC's entities of the label's type, `TIME` for dates, plus the typed
   detectors' values, model/values/mentions.py; for a closed-vocabulary label, the values its cues
   find, model/values/cues.py) are scored by the model: the teacher-forced
   log-probability of the answer `label: candidate` after a one-label prompt, per answer token, every
   candidate of the batch in a few batched forwards. `None` is not among them, so the model must choose.

The pick becomes the label's value, and every candidate with its share among them goes into
`Extraction.candidates` (the review desk's one-click list). Measured on the hand-written corpora
(issue 31), the model's picks are right often but not reliably enough for BI: a pick goes to review
beside a `lexicon_backoff` reason, unless the check in model/answers/vouch.py vouches for it (a lone
phone, e-mail or date of the label's type from the typed detectors). A vouched pick answers the
`unclaimed_value` reason that asked for it, so its record may go to fields.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from model.answers.checks import PARTY_LABELS, PLACE_LABELS, claimed, label_kind, taken_values, unclaimed_entities
from model.answers.parse import format_extraction
from model.answers.prompt import encode_prompts
from model.answers.validate import Extraction, normalised
from model.answers.vouch import vouched
from model.clock import ms_since
from model.values.cues import CUED_LABELS, cued_values
from model.values.entities import Entity, EntityFinder, EntityTag
from model.values.field_types import matches
from model.values.lexicon import organisation_suffixes
from model.values.mentions import mentions
from schemas.messages import Candidate, Document, ReviewCode, ReviewReason, Span

# A label's candidates, at most this many, in order of appearance: a long document's tail adds cost
# and rarely the value.
MAX_CANDIDATES = 8
# Rows per scoring forward.
SCORE_ROWS = 16
# Per field type: LAC's entity tags and the typed detectors whose values are its candidates.
SOURCES: dict[str, tuple[tuple[EntityTag, ...], tuple[str, ...]]] = {
    "person": (("PER",), ()),
    "organisation": (("ORG",), ("organisation",)),
    "date": (("TIME",), ("date",)),
    "phone": ((), ("phone",)),
    "email": ((), ("email",)),
    "amount": ((), ("amount",)),
    "salary": ((), ("salary",)),
}
# (context token ids, answer token ids) -> the answer's summed log-probability, per pair.
Scorer = Callable[[Sequence[tuple[list[int], list[int]]]], list[float]]


def sources(doc: Document, label: str) -> tuple[tuple[EntityTag, ...], tuple[str, ...]]:
    """The entity tags and detector types a label's candidates come from (none: no backoff)."""
    kind = doc.field_types.get(label)
    if kind in SOURCES:
        return SOURCES[kind]
    if label in PARTY_LABELS:
        return ("PER", "ORG"), ("organisation",)
    if label in PLACE_LABELS:
        return ("LOC",), ()
    return (), ()


def open_labels(doc: Document, extraction: Extraction) -> list[str]:
    """The labels the backoff could fill: answered `None`, or only with values not of their type."""
    if doc.task != "extract":
        return []
    return [
        label
        for label in doc.labels
        if (not extraction.fields.get(label) or label in mistyped(extraction))
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
    # A bare suffix (公司) LAC tags as an organisation names none.
    found = [
        c
        for c, e in zip(found, entities, strict=True)
        if e.tag in tags and not (e.tag == "ORG" and e.text in organisation_suffixes())
    ]
    written = mentions(doc.text)
    for kind in types:
        for value in written[kind]:  # type: ignore[index]
            start = doc.text.find(value)
            found.append(Candidate(text=value, start=start, end=start + len(value), score=0.0, source=kind))
    found += [
        Candidate(text=c.text, start=c.start, end=c.end, score=0.0, source="cue") for c in cued_values(doc.text, label)
    ]
    unique: dict[str, Candidate] = {}
    for candidate in sorted(found, key=lambda c: (c.start, -c.end)):
        text = candidate.text.strip()
        if text and text not in unique and not claimed(text, label_kind(doc, label), taken):
            unique[text] = candidate
    return in_role(doc.text, label, list(unique.values()))[:MAX_CANDIDATES]


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


ROLES: dict[str, tuple[Callable[[str, Candidate], bool], bool]] = {
    "毕业院校": (_school, True),
    "工作单位": (_school, False),
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


# A name ending in a company's legal form is whole: LAC's organisation may run on past it
# (鸿睿思博传媒有限公司诚聘测试工程师 in a generated job ad, whose company went wrong, extended).
_WHOLE_NAME_ENDS = ("公司", "Ltd", "Ltd.", "Limited", "Inc.", "LLC")


def extend_cut_values(doc: Document, extraction: Extraction, entities: Sequence[Entity]) -> None:
    """Values the text continues into a longer value of the label's sources (LAC's entities of its
    type, its typed detector's mentions) from the same character: the model stopped early (华南理工大
    for 华南理工大学, 韦秀 for 韦秀兰, 郑州大学 for 郑州大学第一附属医院). Each becomes the longest
    such value, beside a `value_boundary` reason naming what it was; the record goes to review.

    Not where the continuation starts with a space or a line break (a label's line after it), where
    another label's value claims the longer one (a party's name before a company: 宋志远自愿加入青岛…),
    or, for a typed label, where the longer one does not read as the type (2022年3月1日起). Not for
    places: a place nests in a longer one (北京 in 北京市朝阳区) and either may be the value (a long
    generated news item's 地点 北京 went wrong, extended)."""
    for label in doc.labels:
        tags, types = sources(doc, label)
        spans = extraction.fields.get(label)
        if not spans or not (tags or types) or label in PLACE_LABELS:
            continue
        kind = doc.field_types.get(label)
        others = [
            (s.text, label_kind(doc, other))
            for other, spans_ in extraction.fields.items()
            if other != label
            for s in spans_
        ]
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
                (end, source)
                for start, end, source in longer
                if start == span.start
                and span.end < end <= window.end
                and not doc.text[span.end].isspace()
                and not claimed(doc.text[start:end], label_kind(doc, label), others)
                and (kind is None or matches(kind, doc.text[start:end]))
            ]
            if not ends or span.text.endswith(_WHOLE_NAME_ENDS):
                fixed.append(span)
                continue
            end, source = max(ends)
            text = doc.text[span.start : end]
            fixed.append(
                normalised(msgspec.structs.replace(span, text=text, end=end, margin=0.0, normalised=None), kind)
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


@dataclass
class BackoffCost:
    """What a batch's backoff took: documents LAC read, labels and candidates scored, milliseconds."""

    documents: int = 0
    lexicon_documents: int = 0
    labels: int = 0
    candidates: int = 0
    lexicon_ms: float = 0.0
    score_ms: float = 0.0


class Backoff:
    """The backoff over one model: `tokenizer` builds the prompts `score` reads."""

    def __init__(
        self, find: EntityFinder, score: Scorer, tokenizer: PreTrainedTokenizerBase, max_input_tokens: int
    ) -> None:
        self.find = find
        self.score = score
        self.tokenizer = tokenizer
        self.max_input_tokens = max_input_tokens
        self.eos_id = int(tokenizer.eos_token_id)

    def __call__(self, docs: Sequence[Document], extractions: Sequence[Extraction]) -> BackoffCost:
        """Adds the cross-check's reasons, the picks and their candidates to `extractions` in place."""
        cost = BackoffCost(documents=len(docs))
        started = time.perf_counter()
        pairs_in = zip(docs, extractions, strict=True)
        todo = [(doc, ex, labels) for doc, ex in pairs_in if (labels := open_labels(doc, ex))]
        found = self.find.many([doc.text for doc, _, _ in todo])
        cost.lexicon_documents, cost.lexicon_ms = len(todo), ms_since(started)
        started = time.perf_counter()
        asks: list[tuple[Document, Extraction, str, list[Candidate], list[int]]] = []
        for (doc, extraction, labels), entities in zip(todo, found, strict=True):
            extend_cut_values(doc, extraction, entities)
            extraction.reasons += unclaimed_entities(doc, extraction.fields, entities, extraction.reasons)
            flagged = {r.label for r in extraction.reasons if r.code == ReviewCode.UNCLAIMED_VALUE}
            flagged |= mistyped(extraction)
            empty = any(r.code == ReviewCode.EMPTY_RECORD for r in extraction.reasons)
            if not extraction.needs_review:
                continue
            for label in labels:
                if label not in flagged and not empty:
                    continue
                # A mistyped label's own values claim nothing (郑 is no part of a name it could take).
                others = {other: spans for other, spans in extraction.fields.items() if other != label}
                candidates = offered(doc, label, entities, taken_values(doc, others))
                prompt = self._prompt(doc, label)
                # What the prompt holds, and a window of the record read (spans say which).
                candidates = [c for c in candidates if c.end <= prompt[1] and _read(extraction, c)]
                if candidates:
                    asks.append((doc, extraction, label, candidates, prompt[0]))
        pairs = [(prompt, self._answer(label, c.text)) for _, _, label, cs, prompt in asks for c in cs]
        # Per answer token: a sum favours the shorter candidate, each token adding a negative term
        # (the several-candidate picks were wrong more often than right; found went 73.6 / 56.4 /
        # 29.9% -> 75.5 / 57.2 / 31.1% on freeform / layouts / mixed with the shipped model).
        summed = self.score(pairs) if pairs else []
        scores = iter(lp / len(answer) for lp, (_, answer) in zip(summed, pairs, strict=True))
        # A value offered to two labels of one document can be at most one's: none vouches for it.
        offers = Counter((id(extraction), c.text) for _, extraction, _, cs, _ in asks for c in cs)
        for doc, extraction, label, candidates, _ in asks:
            alone = all(offers[id(extraction), c.text] == 1 for c in candidates)
            _pick(doc, extraction, label, candidates, [next(scores) for _ in candidates], alone)
        cost.labels, cost.candidates = len(asks), len(pairs)
        cost.score_ms = ms_since(started)
        return cost

    def _prompt(self, doc: Document, label: str) -> tuple[list[int], int]:
        """The one-label prompt's token ids, and how much of the text it holds (characters)."""
        one = msgspec.structs.replace(doc, labels=[label])
        encoded = encode_prompts(self.tokenizer, one, 1, self.max_input_tokens)
        return encoded.prompts[0], len(encoded.text)

    def _answer(self, label: str, value: str) -> list[int]:
        text = format_extraction([label], {label: [value]})
        return [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.eos_id]


def _read(extraction: Extraction, candidate: Candidate) -> bool:
    return any(w.start <= candidate.start and candidate.end <= w.end for w in extraction.windows)


def _pick(
    doc: Document, extraction: Extraction, label: str, candidates: list[Candidate], logprobs: list[float], alone: bool
) -> None:
    """The model's choice among `candidates`: each one's share of their summed probability; to review
    unless vouched for (model/answers/vouch.py) and offered to no other label (`alone`)."""
    before = [s.text for s in extraction.fields.get(label, [])]
    answered = f"answered {before} (not of its type)" if before else "answered None"
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    # Best first; a tie goes to the earlier in the text (the order `offered` gave).
    ranked = sorted(range(len(candidates)), key=lambda i: (-weights[i], i))
    best = ranked[0]
    scored = [msgspec.structs.replace(candidates[i], score=weights[i] / total, picked=i == best) for i in ranked]
    extraction.candidates[label] = scored
    pick = scored[0]
    # The window that read it (a long document's record says per span which one did).
    window = next(i for i, w in enumerate(extraction.windows) if w.start <= pick.start and pick.end <= w.end)
    extraction.fields[label] = [
        Span(text=pick.text, start=pick.start, end=pick.end, confidence=pick.score, margin=0.0, window=window)
    ]
    if alone and vouched(doc, label, scored):
        # The label has its value now: the cross-check's reason for it is answered.
        extraction.reasons = [
            r for r in extraction.reasons if not (r.code == ReviewCode.UNCLAIMED_VALUE and r.label == label)
        ]
        return
    extraction.reasons.append(
        ReviewReason(
            code=ReviewCode.LEXICON_BACKOFF,
            detail=f"{answered}; made to choose among {len(scored)} candidates ({pick.source}), "
            f"the model picked {pick.text!r} with a share of {pick.score:.2f}",
            label=label,
            value=pick.text,
        )
    )


class ModelScorer:
    """Teacher-forced answer log-probabilities from a causal LM (transformers).

    The backoff's pairs come a document at a time, and a document's one-label prompts differ only
    after its text: consecutive pairs sharing a prefix of at least `MIN_SHARED` tokens are one group,
    whose prefix goes through the model once; each row then reads only its own rest (the label, the
    answer) on a copy of the prefix's cache, right-padded, `rows` at a time.
    """

    MIN_SHARED = 16

    def __init__(self, model: PreTrainedModel, pad_id: int, rows: int = SCORE_ROWS) -> None:
        self.model = model
        self.pad_id = pad_id
        self.rows = rows

    @torch.inference_mode()
    def __call__(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        out = [0.0] * len(pairs)
        for group in _groups([context for context, _ in pairs], self.MIN_SHARED):
            contexts = [pairs[i][0] for i in group]
            # Every row keeps at least one context token: the one whose logits predict its answer's first.
            shared = min(_common_prefix(contexts), *(len(c) - 1 for c in contexts))
            cache = None
            if shared:
                prefix = torch.tensor([contexts[0][:shared]], device=self.model.device)
                cache = self.model(input_ids=prefix, use_cache=True).past_key_values
            for at in range(0, len(group), self.rows):
                rows = group[at : at + self.rows]
                self._score_rows(pairs, rows, shared, cache, out)
        return out

    def _score_rows(self, pairs, rows: list[int], shared: int, cache, out: list[float]) -> None:
        rests = [pairs[i][0][shared:] + pairs[i][1] for i in rows]
        width = max(len(r) for r in rests)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), shared + width), dtype=torch.long)
        mask[:, :shared] = 1
        for r, rest in enumerate(rests):
            ids[r, : len(rest)] = torch.tensor(rest)
            mask[r, shared : shared + len(rest)] = 1
        past = None
        if cache is not None:
            past = copy.deepcopy(cache)
            past.batch_repeat_interleave(len(rows))
        device = self.model.device
        logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device), past_key_values=past).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
        for r, i in enumerate(rows):
            answer = pairs[i][1]
            start = len(pairs[i][0]) - shared  # the answer's first token in the row's rest
            picked = logprobs[r, start - 1 : start - 1 + len(answer)].gather(1, torch.tensor(answer)[:, None])
            out[i] = float(picked.sum())


def _common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for k in range(n):
        if any(s[k] != first[k] for s in sequences):
            return k
    return n


def _groups(contexts: Sequence[Sequence[int]], min_shared: int) -> list[list[int]]:
    """Runs of consecutive contexts sharing at least `min_shared` leading tokens (or all of one)."""
    groups: list[list[int]] = []
    for i, context in enumerate(contexts):
        if groups:
            head = contexts[groups[-1][0]]
            if _common_prefix([head, context]) >= min(min_shared, len(head), len(context)):
                groups[-1].append(i)
                continue
        groups.append([i])
    return groups
