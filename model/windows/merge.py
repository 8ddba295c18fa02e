"""Merging the windows of a long document back into one extraction (the split: model/windows/split.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import msgspec

from model.answers.checks import DOCUMENT_CODES
from model.answers.validate import AlarmedStep, Decode, Extraction, raise_alarms
from model.config import EngineSettings
from model.windows.split import Window
from schemas.messages import ReviewCode, Span, TextWindow

# Reasons about one value: they stand only while that value is still a field after merging.
VALUE_REASONS = frozenset({ReviewCode.LOW_CONFIDENCE, ReviewCode.TYPE_MISMATCH, ReviewCode.VALUE_BOUNDARY})


def merge_windows(
    doc_id: str,
    labels: Sequence[str],
    windows: Sequence[Window],
    parts: Sequence[Extraction],
    single_value: Collection[str],
    settings: EngineSettings,
    decode: Decode,
) -> Extraction:
    """One extraction from the windows' own (`parts[i]` read `windows[i]`, offsets within it).

    Per label, the rule (documented in the README):
    1. a span moves to its offsets in the document and remembers its window;
    2. the same span (same offsets) from overlapping windows counts once, the copy from the window
       that owns it (see `Window`), then the more confident;
    3. overlapping different spans: the one its window owns wins, then the longer, then the more confident;
    4. one value is reported once: repeated mentions of the same text keep the earliest;
    5. labels in `single_value` keep their most confident span (then owned, longer, earlier) and list
       the others as `alternatives`; all other labels keep the union of their most confident span
       and every other one at or above `confidence_threshold`, and list the less confident ones as
       alternatives. A window that does not hold a label's value makes the model guess, unsure
       (measured on the demo model: most such guesses are below 0.85); the union of a long
       document's guesses would bury its values, and a record's `alternatives` still shows them.

    Entropy alarms follow what is kept (`_alarm_kept`): `decode` spells the alarms that remain.
    """
    confidence_threshold = settings.confidence_threshold
    merged = Extraction(doc_id=doc_id, windows=[TextWindow(start=w.start, end=w.end) for w in windows])
    candidates: dict[str, list[_Candidate]] = {}
    for index, (window, part) in enumerate(zip(windows, parts, strict=True)):
        for label, spans in part.fields.items():
            found = candidates.setdefault(label, [])
            for span in spans:
                moved = msgspec.structs.replace(
                    span, start=span.start + window.start, end=span.end + window.start, window=index
                )
                found.append(_Candidate(moved, window.own_start <= moved.start and moved.end <= window.own_end))
    for label in [*labels, *(label for label in candidates if label not in labels)]:
        if label not in candidates:
            continue
        ranked = sorted(
            _resolve(candidates[label]), key=lambda c: (-c.span.confidence, not c.owned, -_length(c), c.span.start)
        )
        several = label not in single_value
        kept = ranked[:1] + [c for c in ranked[1:] if several and c.span.confidence >= confidence_threshold]
        others = [c for c in ranked[1:] if c not in kept]
        merged.fields[label] = sorted((c.span for c in kept), key=lambda s: s.start)
        if others:
            merged.alternatives[label] = sorted((c.span for c in others), key=lambda s: s.start)
    _merge_the_rest(merged, parts, len(windows))
    raise_alarms(merged, [t.generation for t in merged.traces], decode, settings, f" in {len(windows)} windows")
    return merged


@dataclass(frozen=True)
class _Candidate:
    span: Span
    owned: bool


def _length(candidate: _Candidate) -> int:
    return candidate.span.end - candidate.span.start


def _resolve(candidates: Sequence[_Candidate]) -> list[_Candidate]:
    same: dict[tuple[int, int], _Candidate] = {}
    for c in candidates:
        key = (c.span.start, c.span.end)
        if key not in same or (c.owned, c.span.confidence) > (same[key].owned, same[key].span.confidence):
            same[key] = c
    kept: list[_Candidate] = []
    for c in sorted(same.values(), key=lambda c: (not c.owned, -_length(c), -c.span.confidence, c.span.start)):
        if all(c.span.end <= k.span.start or k.span.end <= c.span.start for k in kept):
            kept.append(c)
    earliest: dict[str, _Candidate] = {}
    for c in sorted(kept, key=lambda c: c.span.start):
        earliest.setdefault(c.span.text, c)
    return list(earliest.values())


def _merge_the_rest(merged: Extraction, parts: Sequence[Extraction], count: int) -> None:
    """Classes, reasons, alarmed steps, retries and traces of all windows, numbered across the document."""
    # A value's reason stands only where that window's span of it is the one kept (not a repeat elsewhere).
    kept_values = {(label, s.text, s.window) for label, spans in merged.fields.items() for s in spans}
    seen_reasons: set[tuple[ReviewCode, str | None, str | None]] = set()
    for part in parts:  # first: a class's alarms stand when any window chose it
        merged.classes.extend(c for c in part.classes if c not in merged.classes)
    prompt = 0
    for index, part in enumerate(parts):
        for reason in part.reasons:
            if reason.code is ReviewCode.ENTROPY_ALARM or reason.code in DOCUMENT_CODES:
                continue  # one for the document, from the alarmed steps that stay / the merged record
            if reason.code in VALUE_REASONS and (reason.label, reason.value, index) not in kept_values:
                continue  # about a candidate the merge let go
            key = (reason.code, reason.label, reason.value)
            if key not in seen_reasons:
                seen_reasons.add(key)
                detail = f"{reason.detail} (window {index + 1} of {count})"
                merged.reasons.append(msgspec.structs.replace(reason, detail=detail))
        # A window's steps number its own prompts; the document's number them all, as its audit does.
        merged.alarmed.extend(
            dataclasses.replace(a, chunk=a.chunk + prompt) for a in part.alarmed if _alarm_kept(a, merged)
        )
        merged.retries += part.retries
        merged.traces.extend(part.traces)
        merged.trace_windows.extend([index] * len(part.traces))
        prompt += len(part.traces)


def _alarm_kept(step: AlarmedStep, merged: Extraction) -> bool:
    """Whether a window's alarmed step decided what the document's record keeps.

    A value's steps count when the record keeps that value for its label (a field, not an
    alternative); a label's decision that kept no value in its window (its `None`) counts when the
    record keeps no value for the label either. So a window without a label's value, where the
    model guessed or hesitated, raises no alarm once another window's value is what the record says.
    """
    if step.label is None:
        return step.value is None or step.value in merged.classes
    kept = {span.text for span in merged.fields.get(step.label, [])}
    return step.value in kept if step.value is not None else not kept
