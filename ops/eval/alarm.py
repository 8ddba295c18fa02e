"""`python -m ops.eval.alarm [FILE ...] [--model DIR]`: what the entropy alarm would catch, measured on
every step that decided a record, with two signals side by side.

The product alarms on the entropy of the model's full next-token distribution (model/answers/validate.py).
On a character-level model that is high at a rare character it must copy (a rare surname's first
character: the legal choice 0.6-0.98 and right), so it sends right records to review. Beside it, the
entropy among the tokens the grammar left legal, which is what decided the record: from each step's
runners-up (their probabilities are renormalised over the legal tokens, model/signals.py), the mass
beyond them counted as one lump, so it is a lower bound.

For each corpus with truth (default: the hand-written ones), deciding steps by what they decided (a
value, or a label's None) and whether that was right, and how many each signal flags, and of those
how many the confidence gate leaves alone (what the alarm adds to review); then the documents each
would alarm; then, per alarm rule (the product's: one deciding step above 2.5 nats; or several such
steps; or the legal entropy), the records it would send to fields with every other check as it is,
and of their expected values how many are wrong or missing (the gate's 2% bar).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from model.answers.validate import Extraction
from ops.eval.accuracy import normalise
from ops.eval.gate import corpus_runs, doubted, held, shortfall, wanted
from schemas.messages import Document

FULL = 2.5  # the product's threshold, nats
LEGAL = (0.3, 0.6, 1.0)


def legal_entropy(probs: Sequence[float]) -> float:
    """Entropy (nats) of a distribution known by its largest probabilities, the rest as one lump."""
    kept = [p for p in probs if p > 0]
    rest = max(0.0, 1.0 - sum(kept))
    return -sum(p * math.log(p) for p in kept) - (rest * math.log(rest) if rest > 0 else 0.0)


class Step(NamedTuple):
    """One deciding step: its document, what it decided ("value" or "None"), whether that was right,
    its two entropies, and whether the confidence gate flagged the value it decided too."""

    doc_id: str
    kind: str
    right: bool
    full: float
    legal: float
    doubted: bool


def deciding_steps(docs: Sequence[Document], extractions: Sequence[Extraction], truth) -> list[Step]:
    """Every deciding step of the documents' records, from an engine that alarms at 0 nats (so that
    every deciding step is listed)."""
    rows = []
    for doc, ex in zip(docs, extractions, strict=True):
        want = wanted(doc, truth)
        low = doubted(ex)
        for step in ex.alarmed:
            label = step.label or ""
            if step.value is None:
                kind, right = "None", not want.get(label)
            else:
                kind, right = "value", normalise(step.value, doc.field_types.get(label)) in want.get(label, set())
            probs = ex.traces[step.chunk].generation.top_probs[step.step]
            rows.append(
                Step(doc.doc_id, kind, right, step.entropy, legal_entropy(probs), (step.label, step.value) in low)
            )
    return rows


def report(name: str, documents: int, rows: list[Step]) -> str:
    """Per kind of step, each signal's flags as `flagged/alone`: alone, the confidence gate did not
    flag the same value (what the alarm adds to review)."""
    tests = [lambda r: r.full > FULL, *(lambda r, t=t: r.legal > t for t in LEGAL)]
    lines = [
        f"== {name}: {len(rows)} deciding steps in {documents} documents (flagged/alone)",
        f"   decided       steps    full>{FULL}" + "".join(f"  legal>{t}" for t in LEGAL),
    ]
    for kind in ("value", "None"):
        for right in (True, False):
            chosen = [r for r in rows if r.kind == kind and r.right == right]
            if chosen:
                cells = [f"{sum(map(t, chosen))}/{sum(t(r) and not r.doubted for r in chosen)}" for t in tests]
                label = f"{kind} {'right' if right else 'wrong'}"
                lines.append(f"   {label:12s} {len(chosen):6d}  " + "".join(f"{c:>10s}" for c in cells))
    alarmed = [len({r.doc_id for r in rows if t(r)}) for t in tests]
    lines.append("   documents alarmed    " + "".join(f"{n:10d}" for n in alarmed))
    return "\n".join(lines)


# Alarm rules: a record alarms when at least `steps` deciding steps read above `full` nats, or when
# any reads above `legal` nats among the legal tokens (ln 2: torn between two options).
RULES: dict[str, tuple[int, float]] = {
    f"full>{FULL} x1 (product)": (1, math.inf),
    f"full>{FULL} x2": (2, math.inf),
    f"full>{FULL} x3": (3, math.inf),
    "legal>ln2": (10**9, math.log(2)),
    f"full>{FULL} x2 or legal>ln2": (2, math.log(2)),
}


def rules_report(docs: Sequence[Document], steps_of: Sequence[Extraction], quiet: Sequence[Extraction], truth) -> str:
    """Per alarm rule: records alarmed, records to fields, and of the values expected in those the
    wrong or missing. `steps_of`: the records of an engine alarming at 0 nats (every deciding step);
    `quiet`: of one that never alarms, whose other reasons and fields are the record's without the
    alarm (an alarmed record is backed off as one in review, which changes both)."""
    lines = ["   rule                          alarmed  to fields  wrong or missing in fields"]
    # Per record: its deciding steps above FULL, and its most torn one's legal entropy.
    signals = [
        (
            sum(step.entropy > FULL for step in ex.alarmed),
            max((legal_entropy(ex.traces[s.chunk].generation.top_probs[s.step]) for s in ex.alarmed), default=0.0),
        )
        for ex in steps_of
    ]
    for name, (least, legal) in RULES.items():
        alarmed = to_fields = expected = missing = 0
        for doc, record, (full, torn) in zip(docs, quiet, signals, strict=True):
            alarm = full >= least or torn > legal
            alarmed += alarm
            if alarm or record.needs_review:
                continue
            to_fields += 1
            counts = shortfall(wanted(doc, truth), held(doc, record))
            expected, missing = expected + counts[0], missing + counts[1]
        lines.append(f"   {name:28s} {alarmed:8d} {to_fields:10d}  {missing}/{expected}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    title = __doc__.splitlines()[0]
    every_step = corpus_runs(title, argv, entropy_threshold=0.0)
    never = corpus_runs(title, argv, entropy_threshold=math.inf)
    for (path, docs, truth, extractions), (_, _, _, quiet) in zip(every_step, never, strict=True):
        print(report(str(path), len(docs), deciding_steps(docs, extractions, truth)), flush=True)
        print(rules_report(docs, extractions, quiet, truth), flush=True)


if __name__ == "__main__":
    main()
