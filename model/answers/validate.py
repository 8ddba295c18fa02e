"""From greedy generations to an `Extraction`: parse, ground every value in the source, gate.

A value that is not a substring of the document never becomes a field; it is reported as a review
reason instead. This module is pure: every engine hands it the same `Generation`s.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec
from transformers import PreTrainedTokenizerBase

from model.answers.checks import boundary_problem, document_reasons
from model.answers.parse import ParsedAnswer, Piece, parse_classification, read_extraction
from model.config import EngineSettings
from model.grammar.token_bytes import TokenBytes
from model.signals import Generation
from model.values.normalize import Mismatch, normal_form
from schemas.field_sets import FieldType
from schemas.messages import Candidate, Document, EntropyAlarm, ReviewCode, ReviewReason, Span, TextWindow, TokenChoice

MAX_ALARMS_PER_DOCUMENT = 8
# Problems whose value stays a field, for the reviewer to see beside the reason (it is in the source).
KEPT_FOR_REVIEW = frozenset({ReviewCode.TYPE_MISMATCH, ReviewCode.VALUE_BOUNDARY})

Decode = Callable[[Sequence[int]], str]


@dataclass(frozen=True)
class DecodeTrace:
    """One prompt's generation with each token's text, kept by reference for the audit trail."""

    labels: tuple[str, ...]
    generation: Generation
    token_texts: list[str]


@dataclass(frozen=True)
class AlarmedStep:
    """A decode step above the entropy threshold that counts: its token decides a label or is kept.

    `label` is None for a classification; `value` is the kept value (or class) the token belongs to,
    None for a label's decision that kept no value (its `None`, or a value that was not kept).
    """

    entropy: float
    chunk: int
    step: int
    label: str | None
    value: str | None


@dataclass
class Extraction:
    doc_id: str
    fields: dict[str, list[Span]] = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)
    reasons: list[ReviewReason] = field(default_factory=list)
    alarms: list[EntropyAlarm] = field(default_factory=list)
    alarmed_steps: int = 0
    # Every step behind `alarmed_steps`, so that a merge of windows can drop those of values it let go.
    alarmed: list[AlarmedStep] = field(default_factory=list)
    # Re-decodes the validation loop spent on failing values (model/answers/retry.py).
    retries: int = 0
    traces: list[DecodeTrace] = field(default_factory=list)
    # The parts of the document the model read (one: the whole text; a long one's windows,
    # model/windows/), and per trace the index of the window it read.
    windows: list[TextWindow] = field(default_factory=list)
    trace_windows: list[int] = field(default_factory=list)
    # Labels that hold one value: the candidates the most confident one beat, at their offsets
    # (a merge of windows decides between them).
    alternatives: dict[str, list[Span]] = field(default_factory=dict)
    # Labels the lexicon backoff filled (model/answers/backoff.py): every candidate it offered, best first.
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)

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
    retries: Sequence[Mapping[str, int]] = (),
) -> Extraction:
    """`retries`, per chunk, the re-decodes the validation loop spent per label (model/answers/retry.py)."""
    result = Extraction(
        doc_id=doc.doc_id,
        retries=sum(n for chunk in retries for n in chunk.values()),
        windows=[TextWindow(start=0, end=len(doc.text))],
    )
    if truncated:
        result.reasons.append(
            ReviewReason(
                code=ReviewCode.TRUNCATED, detail="the document is longer than the model window; only its head was read"
            )
        )
    for chunk_index, (labels, generation) in enumerate(zip(chunks, generations, strict=True)):
        output, token_ends = detokenize(generation.token_ids, decode)
        # Slices of text already decoded: the audit trail costs nothing here when it is off.
        token_texts = [output[start:end] for start, end in zip([0, *token_ends], token_ends, strict=False)]
        result.traces.append(DecodeTrace(tuple(labels), generation, token_texts))
        result.trace_windows.append(0)
        if doc.task == "classify":
            answer = parse_classification(output, labels)
        else:
            answer = read_extraction(output, tuple(labels), doc.text)
        chunk_retries = retries[chunk_index] if retries else {}
        kept = _collect(result, doc, labels, answer, generation, output, token_ends, settings, chunk_retries)
        if not generation.finished:
            result.reasons.append(
                ReviewReason(
                    code=ReviewCode.INCOMPLETE_OUTPUT,
                    detail=f"prompt {chunk_index} hit the limit of {settings.max_new_tokens} new tokens",
                )
            )
        deciding = deciding_steps(answer, kept, token_ends, len(generation.token_ids), doc.task == "classify")
        result.alarmed += [
            AlarmedStep(e, chunk_index, step, *deciding[step])
            for step, e in enumerate(generation.entropies)
            if e > settings.entropy_threshold and step in deciding
        ]
    raise_alarms(result, generations, decode, settings)
    result.reasons += document_reasons(doc, result.fields)
    return result


def deciding_steps(
    answer: ParsedAnswer,
    kept: Mapping[str | None, Sequence[Piece]],
    token_ends: Sequence[int],
    steps: int,
    classify: bool = False,
) -> dict[int, tuple[str | None, str | None]]:
    """The steps whose entropy may raise an alarm, each with its (label, kept value or None).

    An alarm must point at an uncertainty that changed the record. Those steps are: the token where a
    label's answer begins (it decides between `None` and a value), and the tokens of every value kept
    as a field (or class), with the token that ends it (which decides its extent). The label heads,
    `: ` and line ends the grammar lays out, and values that never became fields, decide nothing in
    the record: a model unsure there (a window without the value, guessing) is not an alarm.
    A classification's answer begins at its first token.
    """
    tags: dict[int, tuple[str | None, str | None]] = {}
    starts: Mapping[str | None, int] = {None: 0} if classify else answer.starts
    for label, start in starts.items():
        for step in piece_steps(Piece("", start, start + 1), token_ends):
            tags[step] = (label, None)
    for label, pieces in kept.items():
        for piece in pieces:
            spelled = piece_steps(piece, token_ends)
            if not spelled:
                continue
            last = spelled[-1]
            # The token after the value's last ends it, unless that last token already runs past it.
            ending = [last + 1] if token_ends[last] <= piece.end and last + 1 < steps else []
            for step in [*spelled, *ending]:
                tags[step] = (label, piece.text)
    return tags


def raise_alarms(
    result: Extraction,
    generations: Sequence[Generation],
    decode: Decode,
    settings: EngineSettings,
    where: str = "",
) -> None:
    """From `result.alarmed`: the count, and where it reaches `settings.entropy_alarm_steps` the worst
    steps spelled out in step order (the others are counted, not listed) and one review reason for the
    document; `where` ends the reason's detail."""
    result.alarmed_steps = len(result.alarmed)
    if result.alarmed_steps < settings.entropy_alarm_steps:
        result.alarms = []
        return
    worst = sorted(result.alarmed, key=lambda a: (-a.entropy, a.chunk, a.step))[:MAX_ALARMS_PER_DOCUMENT]
    result.alarms = [
        _alarm(a.chunk, a.step, generations[a.chunk], decode, settings)
        for a in sorted(worst, key=lambda a: (a.chunk, a.step))
    ]
    if result.alarms:
        result.reasons.append(
            ReviewReason(
                code=ReviewCode.ENTROPY_ALARM,
                detail=f"{result.alarmed_steps} deciding decode steps above {settings.entropy_threshold} nats{where}",
            )
        )


def _collect(
    result: Extraction,
    doc: Document,
    labels: Sequence[str],
    answer: ParsedAnswer,
    generation: Generation,
    output: str,
    token_ends: list[int],
    settings: EngineSettings,
    retries: Mapping[str, int],
) -> dict[str | None, list[Piece]]:
    """Fields, classes and reasons into `result`; returns the pieces kept, by label (None: classes)."""
    kept: dict[str | None, list[Piece]] = {}
    for code, label, text in answer.problems:
        result.reasons.append(
            ReviewReason(code=code, detail="the model's answer does not fit", label=label, value=text)
        )
    if doc.task == "classify":
        for piece in answer.values.get("classes", []):
            confidence = _confidence(piece, generation.probs, token_ends)
            _gate(result, None, piece.text, confidence, settings)
            result.classes.append(piece.text)
            kept.setdefault(None, []).append(piece)
        return kept
    for label in labels:
        if label not in answer.values:
            result.reasons.append(
                ReviewReason(
                    code=ReviewCode.INCOMPLETE_OUTPUT, detail="the model gave no line for this label", label=label
                )
            )
        spans = []
        for piece in answer.values.get(label, []):
            if cut_off(generation, piece, output):
                # Unfinished, not invented: possibly cut inside a character. The chunk's
                # incomplete_output reason covers it; it must not read as a hallucination.
                continue
            problem = value_problem(doc, label, piece.text)
            if problem is not None:
                code, detail = problem
                if retries.get(label):
                    detail += f" (still after {retries[label]} re-decodes)"
                result.reasons.append(ReviewReason(code=code, detail=detail, label=label, value=piece.text))
                if code not in KEPT_FOR_REVIEW:
                    continue  # a value not in the source never becomes a field; a mistyped or cut one stays, for review
            start = doc.text.find(piece.text)
            confidence = _confidence(piece, generation.probs, token_ends)
            _gate(result, label, piece.text, confidence, settings)
            span = Span(
                text=piece.text,
                start=start,
                end=start + len(piece.text),
                confidence=confidence,
                margin=min((step_margin(generation, s) for s in piece_steps(piece, token_ends)), default=1.0),
                retries=retries.get(label, 0),
            )
            spans.append(normalised(span, doc.field_types.get(label)))
            kept.setdefault(label, []).append(piece)
        result.fields[label] = spans
    return kept


def cut_off(generation: Generation, piece: Piece, output: str) -> bool:
    """Whether the piece is the answer's last text and the generation stopped at its token limit."""
    return not generation.finished and piece.end == len(output.rstrip())


def value_problem(doc: Document, label: str, text: str) -> tuple[ReviewCode, str] | None:
    """Why a parsed value cannot become a field, if it cannot: not in the source, not of its type, or
    a name cut out of a longer word (model/answers/checks.py)."""
    if text not in doc.text:
        return ReviewCode.NOT_IN_SOURCE, "the value does not occur in the document"
    kind = doc.field_types.get(label)
    outcome = normal_form(kind, text) if kind is not None else None
    if isinstance(outcome, Mismatch):
        return ReviewCode.TYPE_MISMATCH, f"not a {kind}: {outcome.reason}"
    cut = boundary_problem(doc, label, text)
    if cut is not None:
        return ReviewCode.VALUE_BOUNDARY, f"a name cut mid-word: {cut}"
    return None


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


def normalised(span: Span, kind: FieldType | None) -> Span:
    """The span with its normal form when its label is typed and the value reads as that type."""
    outcome = normal_form(kind, span.text) if kind is not None else None
    if outcome is None or isinstance(outcome, Mismatch):
        return span
    return msgspec.structs.replace(span, normalised=outcome)


def detokenize(token_ids: Sequence[int], decode: Decode) -> tuple[str, list[int]]:
    """The generated text and, per token, the character where its text ends (what decoding each
    growing prefix would give: multi-byte characters that span tokens stay intact)."""
    if isinstance(decode, Detokenizer):
        return decode.text_and_ends(token_ids)
    ends = [len(decode(token_ids[: i + 1])) for i in range(len(token_ids))]
    return decode(token_ids), ends


class Detokenizer:
    """Token ids to text, and each token's end in it, from the tokens' bytes: one UTF-8 decode per
    answer instead of one tokenizer call per prefix. Memoised: the validation loop and the
    interpretation read the same answers. Checked against the tokenizer's own decoding, which it
    falls back to where they could differ (a character cut between tokens by a tokenizer that is
    not byte-level, whose byte-fallback decoder writes one replacement character per byte)."""

    KEPT = 4096

    def __init__(self, tokenizer: PreTrainedTokenizerBase, vocab: TokenBytes) -> None:
        self.tokenizer = tokenizer
        self.by_id = vocab.by_id
        self.byte_level = vocab.byte_level
        self._read: dict[tuple[int, ...], tuple[str, list[int]]] = {}
        # One token's text, asked for by every entropy alarm's choice and runners-up: a few thousand
        # tokenizer calls a batch where alarms fire, over a vocabulary's worth of ids at most.
        self._token: dict[int, str] = {}

    def __call__(self, token_ids: Sequence[int]) -> str:
        if len(token_ids) == 1:
            [token_id] = token_ids
            text = self._token.get(token_id)
            if text is None:
                text = self._token[token_id] = self.tokenizer.decode([token_id], skip_special_tokens=True)
            return text
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def text_and_ends(self, token_ids: Sequence[int]) -> tuple[str, list[int]]:
        key = tuple(token_ids)
        found = self._read.get(key)
        if found is None:
            found = self._text_and_ends(key)
            if len(self._read) >= self.KEPT:
                self._read.clear()
            self._read[key] = found
        return found

    def _text_and_ends(self, token_ids: tuple[int, ...]) -> tuple[str, list[int]]:
        pieces = [self.by_id[t] or b"" if t < len(self.by_id) else b"" for t in token_ids]
        data = b"".join(pieces)
        text = data.decode("utf-8", errors="replace")
        # A prefix decodes to one character per lead byte (a cut character to one replacement).
        leads = [0]
        count = 0
        for piece in pieces:
            count += sum(1 for b in piece if b & 0xC0 != 0x80)
            leads.append(count)
        cut = any(piece and piece[0] & 0xC0 == 0x80 for piece in pieces[1:])
        if len(text) != count or (cut and not self.byte_level) or text != self(token_ids):
            ends = [len(self(token_ids[: i + 1])) for i in range(len(token_ids))]
            return self(token_ids), ends
        return text, leads[1:]


def piece_steps(piece: Piece, token_ends: Sequence[int]) -> list[int]:
    """The decode steps whose tokens produced any character of the piece: step i spans characters
    token_ends[i - 1] (0 for the first) to token_ends[i], and the ends never decrease, so the steps
    are one run found by bisection (a scan per piece was most of a batch's postprocess)."""
    if piece.end <= 0 or not token_ends:
        return []
    first = bisect.bisect_right(token_ends, piece.start)  # the first step ending past the piece's start
    last = min(bisect.bisect_left(token_ends, piece.end), len(token_ends) - 1)  # the last starting before its end
    return list(range(first, last + 1))


def step_margin(generation: Generation, step: int) -> float:
    """The chosen token's probability minus the best other token's."""
    chosen = generation.token_ids[step]
    others = [p for t, p in zip(generation.top_ids[step], generation.top_probs[step], strict=True) if t != chosen]
    return generation.probs[step] - max(others, default=0.0)


def _confidence(piece: Piece, probs: Sequence[float], token_ends: Sequence[int]) -> float:
    """The lowest probability among the tokens that produced any character of the piece."""
    return min((probs[step] for step in piece_steps(piece, token_ends)), default=1.0)


def _alarm(chunk: int, step: int, generation: Generation, decode: Decode, settings: EngineSettings) -> EntropyAlarm:
    chosen_id = generation.token_ids[step]
    alternatives = [
        TokenChoice(token_id=token_id, text=decode([token_id]), prob=prob)
        for token_id, prob in zip(generation.top_ids[step], generation.top_probs[step], strict=True)
        if token_id != chosen_id
    ][: settings.top_alternatives]
    return EntropyAlarm(
        chunk=chunk,
        step=step,
        entropy_nats=generation.entropies[step],
        threshold=settings.entropy_threshold,
        chosen=TokenChoice(token_id=chosen_id, text=decode([chosen_id]), prob=generation.probs[step]),
        alternatives=alternatives,
    )
