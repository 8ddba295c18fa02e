"""The lexicon backoff: where the model answered `None` beside a value of the label's type, a
pretrained analyser's entities become the candidates the model must choose among.

After a batch is decoded and merged (model/windows/engine.py calls `Backoff` once per batch, off the
decode loop), documents with a typed or name-like label left empty are read by Baidu's LAC
(model/values/entities.py), batched:

1. values the model cut short of the entity the text continues them into are extended to it
   (`extend_cut_values`, model/answers/candidates.py), beside a `value_boundary` reason;
2. the cross-check: a person, organisation or place LAC tags that no label took, beside a label of
   that type answered `None`, is an `unclaimed_value` (model/answers/checks.py), as the typed
   detectors' phones, dates and amounts already are;
3. for each such label of a document going to review (that check, or the older ones, or a near-empty
   record; or a label answered only with mistyped values), its candidates (model/answers/candidates.py:
   LAC's entities of the label's type, `TIME` for dates, the typed detectors' values, a closed-vocabulary
   label's cued values, in the label's role) are scored by the model: the teacher-forced
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

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
from transformers import PreTrainedTokenizerBase

from model.answers.candidates import (
    extend_cut_values,
    mistyped,
    offered,
    open_labels,
    whole_name,
)
from model.answers.checks import taken_by_others, unclaimed_entities
from model.answers.closed import unworded_values
from model.answers.parse import format_extraction
from model.answers.parties import nameless_parties, reopen_unkeyed_parties
from model.answers.prompt import encode_prompts
from model.answers.validate import Extraction
from model.answers.vouch import vouched
from model.answers.widen import widen
from model.clock import ms_since
from model.values.entities import EntityFinder
from schemas.messages import Candidate, Document, ReviewCode, ReviewReason, Span

# (context token ids, answer token ids) -> the answer's summed log-probability, per pair
# (model/runner/score.py).
Scorer = Callable[[Sequence[tuple[list[int], list[int]]]], list[float]]


@dataclass
class BackoffCost:
    """What a batch's backoff took: documents LAC read, labels backed off, candidates the model scored (a
    label's lone candidate needs no score), milliseconds."""

    documents: int = 0
    lexicon_documents: int = 0
    labels: int = 0
    candidates: int = 0
    lexicon_ms: float = 0.0
    score_ms: float = 0.0

    def __add__(self, other: BackoffCost) -> BackoffCost:
        return BackoffCost(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)))


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
        pairs_in = list(zip(docs, extractions, strict=True))
        for doc, extraction in pairs_in:
            reopen_unkeyed_parties(doc, extraction)
            nameless_parties(doc, extraction)
            unworded_values(doc, extraction)
        todo = [(doc, ex, labels) for doc, ex in pairs_in if (labels := open_labels(doc, ex))]
        found = self.find.many([doc.text for doc, _, _ in todo])
        cost.lexicon_documents, cost.lexicon_ms = len(todo), ms_since(started)
        started = time.perf_counter()
        asks: list[tuple[Document, Extraction, str, list[Candidate], list[int]]] = []
        for (doc, extraction, labels), entities in zip(todo, found, strict=True):
            extend_cut_values(doc, extraction, entities)
            extraction.reasons += unclaimed_entities(doc, extraction.fields, entities, extraction.reasons)
            flagged = {r.label for r in extraction.reasons if r.code == ReviewCode.UNCLAIMED_VALUE}
            wrong = mistyped(extraction)
            flagged |= wrong
            empty = any(r.code == ReviewCode.EMPTY_RECORD for r in extraction.reasons)
            if not extraction.needs_review:
                continue
            # Values not of their label's type claim nothing (郑 is no part of a name a label could take;
            # 医院名称's 海 燕 is no part of the doctor 龙 海 燕).
            typed = {other: spans for other, spans in extraction.fields.items() if other not in wrong}
            for label in labels:
                if label not in flagged and not empty:
                    continue
                candidates = offered(doc, label, entities, taken_by_others(doc, typed, label))
                prompt = self._prompt(doc, label)
                # What the prompt holds, and a window of the record read (spans say which).
                candidates = [c for c in candidates if c.end <= prompt[1] and _read(extraction, c)]
                if candidates:
                    asks.append((doc, extraction, label, candidates, prompt[0]))
        # A lone candidate's share is 1 whatever the model says of it: only choices are scored.
        choices = [ask for ask in asks if len(ask[3]) > 1]
        pairs = [(prompt, self._answer(label, c.text)) for _, _, label, cs, prompt in choices for c in cs]
        # Per answer token: a sum favours the shorter candidate, each token adding a negative term
        # (the several-candidate picks were wrong more often than right; found went 73.6 / 56.4 /
        # 29.9% -> 75.5 / 57.2 / 31.1% on freeform / layouts / mixed with the shipped model).
        summed = self.score(pairs) if pairs else []
        scores = iter(lp / len(answer) for lp, (_, answer) in zip(summed, pairs, strict=True))
        # A value offered to two labels of one document can be at most one's: none vouches for it.
        offers = Counter((id(extraction), c.text) for _, extraction, _, cs, _ in asks for c in cs)
        for doc, extraction, label, candidates, _ in asks:
            alone = all(offers[id(extraction), c.text] == 1 for c in candidates)
            logprobs = [next(scores) for _ in candidates] if len(candidates) > 1 else [0.0]
            _pick(doc, extraction, label, candidates, logprobs, alone)
        for (doc, extraction, _), entities in zip(todo, found, strict=True):
            widen(doc, extraction, entities)
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
    best = whole_name(candidates, ranked[0])
    scored = [msgspec.structs.replace(candidates[i], score=weights[i] / total, picked=i == best) for i in ranked]
    extraction.candidates[label] = scored
    pick = next(c for c in scored if c.picked)
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
