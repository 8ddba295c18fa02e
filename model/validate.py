"""From greedy generations to an `Extraction`: parse, ground every value in the source, gate.

A value that is not a substring of the document never becomes a field; it is reported as a review
reason instead. This module is pure: every engine hands it the same `Generation`s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import msgspec

from model.config import EngineSettings
from model.normalize import Mismatch, normalise
from model.parse import ParsedAnswer, Piece, parse_classification, parse_extraction
from model.signals import Generation
from schemas.field_sets import FieldType
from schemas.messages import Document, EntropyAlarm, ReviewCode, ReviewReason, Span, TokenChoice

MAX_ALARMS_PER_DOCUMENT = 8

Decode = Callable[[Sequence[int]], str]


@dataclass(frozen=True)
class DecodeTrace:
    """One prompt's generation with each token's text, kept by reference for the audit trail."""

    labels: tuple[str, ...]
    generation: Generation
    token_texts: list[str]


@dataclass
class Extraction:
    doc_id: str
    fields: dict[str, list[Span]] = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)
    reasons: list[ReviewReason] = field(default_factory=list)
    alarms: list[EntropyAlarm] = field(default_factory=list)
    alarmed_steps: int = 0
    # Re-generations the validation loop asked for (none yet: the reference engine decodes once).
    retries: int = 0
    traces: list[DecodeTrace] = field(default_factory=list)

    @property
    def needs_review(self) -> bool:
        return bool(self.reasons)


def interpret(
    doc: Document,
    chunks: Sequence[tuple[str, ...]],
    generations: Sequence[Generation],
    decode: Decode,
    settings: EngineSettings,
    truncated: bool,
) -> Extraction:
    result = Extraction(doc_id=doc.doc_id)
    if truncated:
        result.reasons.append(
            ReviewReason(
                code=ReviewCode.TRUNCATED, detail="the document is longer than the model window; only its head was read"
            )
        )
    alarms: list[EntropyAlarm] = []
    for chunk_index, (labels, generation) in enumerate(zip(chunks, generations, strict=True)):
        output, token_ends = _detokenize(generation.token_ids, decode)
        # Slices of text already decoded: the audit trail costs nothing here when it is off.
        token_texts = [output[start:end] for start, end in zip([0, *token_ends], token_ends, strict=False)]
        result.traces.append(DecodeTrace(tuple(labels), generation, token_texts))
        if doc.task == "classify":
            answer = parse_classification(output, labels)
        else:
            answer = parse_extraction(output, labels, doc.text.__contains__)
        _collect(result, doc, labels, answer, generation, token_ends, settings)
        if not generation.finished:
            result.reasons.append(
                ReviewReason(
                    code=ReviewCode.INCOMPLETE_OUTPUT,
                    detail=f"prompt {chunk_index} hit the limit of {settings.max_new_tokens} new tokens",
                )
            )
        alarms.extend(_alarms(chunk_index, generation, decode, settings))
    result.alarmed_steps = len(alarms)
    if alarms:
        worst = sorted(alarms, key=lambda a: (-a.entropy_nats, a.chunk, a.step))[:MAX_ALARMS_PER_DOCUMENT]
        result.alarms = sorted(worst, key=lambda a: (a.chunk, a.step))
        result.reasons.append(
            ReviewReason(
                code=ReviewCode.ENTROPY_ALARM,
                detail=f"{len(alarms)} decode steps above {settings.entropy_threshold} nats",
            )
        )
    return result


def _collect(
    result: Extraction,
    doc: Document,
    labels: Sequence[str],
    answer: ParsedAnswer,
    generation: Generation,
    token_ends: list[int],
    settings: EngineSettings,
) -> None:
    for code, label, text in answer.problems:
        result.reasons.append(
            ReviewReason(code=code, detail="the model's answer does not fit", label=label, value=text)
        )
    if doc.task == "classify":
        for piece in answer.values.get("classes", []):
            confidence = _confidence(piece, generation.probs, token_ends)
            _gate(result, None, piece.text, confidence, settings)
            result.classes.append(piece.text)
        return
    for label in labels:
        if label not in answer.values:
            result.reasons.append(
                ReviewReason(
                    code=ReviewCode.INCOMPLETE_OUTPUT, detail="the model gave no line for this label", label=label
                )
            )
        spans = []
        for piece in answer.values.get(label, []):
            start = doc.text.find(piece.text)
            if start < 0:
                result.reasons.append(
                    ReviewReason(
                        code=ReviewCode.NOT_IN_SOURCE,
                        detail="the value does not occur in the document",
                        label=label,
                        value=piece.text,
                    )
                )
                continue
            confidence = _confidence(piece, generation.probs, token_ends)
            _gate(result, label, piece.text, confidence, settings)
            span = Span(text=piece.text, start=start, end=start + len(piece.text), confidence=confidence)
            spans.append(_typed(result, label, doc.field_types.get(label), span))
        result.fields[label] = spans


def _gate(result: Extraction, label: str | None, value: str, confidence: float, settings: EngineSettings) -> None:
    if confidence < settings.confidence_threshold:
        result.reasons.append(
            ReviewReason(
                code=ReviewCode.LOW_CONFIDENCE,
                detail=f"confidence {confidence:.4f} is below {settings.confidence_threshold}",
                label=label,
                value=value,
            )
        )


def _typed(result: Extraction, label: str, kind: FieldType | None, span: Span) -> Span:
    """The span with its normal form; a grounded value that is not of its label's type stays, for review."""
    if kind is None:
        return span
    outcome = normalise(kind, span.text)
    if isinstance(outcome, Mismatch):
        result.reasons.append(
            ReviewReason(
                code=ReviewCode.TYPE_MISMATCH, detail=f"not a {kind}: {outcome.reason}", label=label, value=span.text
            )
        )
        return span
    return msgspec.structs.replace(span, normalised=outcome)


def _detokenize(token_ids: Sequence[int], decode: Decode) -> tuple[str, list[int]]:
    """The generated text and, per token, the character where its text ends.

    Decoding growing prefixes (not single tokens) keeps multi-byte characters that span tokens intact.
    """
    ends = [len(decode(token_ids[: i + 1])) for i in range(len(token_ids))]
    return decode(token_ids), ends


def _confidence(piece: Piece, probs: Sequence[float], token_ends: Sequence[int]) -> float:
    """The lowest probability among the tokens that produced any character of the piece."""
    lowest = 1.0
    start = 0
    for prob, end in zip(probs, token_ends, strict=True):
        if start < piece.end and end > piece.start:
            lowest = min(lowest, prob)
        start = end
    return lowest


def _alarms(chunk: int, generation: Generation, decode: Decode, settings: EngineSettings) -> list[EntropyAlarm]:
    alarms = []
    for step, entropy in enumerate(generation.entropies):
        if entropy <= settings.entropy_threshold:
            continue
        chosen_id = generation.token_ids[step]
        alternatives = [
            TokenChoice(token_id=token_id, text=decode([token_id]), prob=prob)
            for token_id, prob in zip(generation.top_ids[step], generation.top_probs[step], strict=True)
            if token_id != chosen_id
        ][: settings.top_alternatives]
        alarms.append(
            EntropyAlarm(
                chunk=chunk,
                step=step,
                entropy_nats=entropy,
                threshold=settings.entropy_threshold,
                chosen=TokenChoice(token_id=chosen_id, text=decode([chosen_id]), prob=generation.probs[step]),
                alternatives=alternatives,
            )
        )
    return alarms
