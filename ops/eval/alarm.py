"""`python -m ops.eval.alarm [FILE ...] [--model DIR]`: what the entropy alarm would catch at several
thresholds, measured on every step that decided a record.

The alarm reads each step's entropy among the tokens the grammar left legal (model/signals.py). For
each corpus with truth (default: the hand-written ones), deciding steps by what they decided (a value,
or a label's None) and whether that was right, and how many each threshold flags, and of those how
many the confidence gate leaves alone (what the alarm adds to review); then the documents each
threshold would alarm, and of those the ones no other check sends to review (what the alarm alone
adds to the review share).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from model.answers.validate import Extraction
from ops.eval.accuracy import normalise
from ops.eval.gate import corpus_runs, doubted, wanted
from schemas.messages import Document, ReviewCode

# The product's default (a fair coin between two tokens) and either side of it.
THRESHOLDS = (0.3, round(math.log(2), 2), 1.0, 2.5)


class Step(NamedTuple):
    """One deciding step: its document, what it decided ("value" or "None"), whether that was right,
    its entropy, whether the confidence gate flagged the value it decided too, and whether another
    check than the alarm sends its document to review."""

    doc_id: str
    kind: str
    right: bool
    entropy: float
    doubted: bool
    reviewed: bool


def deciding_steps(docs: Sequence[Document], extractions: Sequence[Extraction], truth) -> list[Step]:
    """Every deciding step of the documents' records, from an engine that alarms at 0 nats (so that
    every deciding step is listed)."""
    rows = []
    for doc, ex in zip(docs, extractions, strict=True):
        want = wanted(doc, truth)
        low = doubted(ex)
        reviewed = any(r.code != ReviewCode.ENTROPY_ALARM for r in ex.reasons)
        for step in ex.alarmed:
            label = step.label or ""
            if step.value is None:
                kind, right = "None", not want.get(label)
            else:
                kind, right = "value", normalise(step.value, doc.field_types.get(label)) in want.get(label, set())
            rows.append(Step(doc.doc_id, kind, right, step.entropy, (step.label, step.value) in low, reviewed))
    return rows


def report(name: str, documents: int, rows: list[Step]) -> str:
    """Per kind of step, each signal's flags as `flagged/alone`: alone, the confidence gate did not
    flag the same value (what the alarm adds to review)."""
    tests = [lambda r, t=t: r.entropy > t for t in THRESHOLDS]
    lines = [
        f"== {name}: {len(rows)} deciding steps in {documents} documents (flagged/alone)",
        "   decided       steps  " + "".join(f"{'> ' + str(t):>10s}" for t in THRESHOLDS),
    ]
    for kind in ("value", "None"):
        for right in (True, False):
            chosen = [r for r in rows if r.kind == kind and r.right == right]
            if chosen:
                cells = [f"{sum(map(t, chosen))}/{sum(t(r) and not r.doubted for r in chosen)}" for t in tests]
                label = f"{kind} {'right' if right else 'wrong'}"
                lines.append(f"   {label:12s} {len(chosen):6d}  " + "".join(f"{c:>10s}" for c in cells))
    alarmed = [{r.doc_id for r in rows if t(r)} for t in tests]
    only = [{r.doc_id for r in rows if t(r) and not r.reviewed} for t in tests]
    lines.append("   documents alarmed    " + "".join(f"{len(n):10d}" for n in alarmed))
    lines.append("   of them by it alone  " + "".join(f"{len(n):10d}" for n in only))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    for path, docs, truth, extractions in corpus_runs(__doc__.splitlines()[0], argv, entropy_threshold=0.0):
        print(report(str(path), len(docs), deciding_steps(docs, extractions, truth)), flush=True)


if __name__ == "__main__":
    main()
