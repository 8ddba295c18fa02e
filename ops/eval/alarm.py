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
would alarm.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from model.build import build_engine
from model.config import EngineSettings
from ops.eval.accuracy import normalise, read_corpus
from ops.eval.peers import hand_written_corpora
from schemas.messages import ReviewCode

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


def deciding_steps(engine, docs, truth, batch: int) -> list[Step]:
    """Every deciding step of the documents' records. `engine` must alarm at 0 nats, so that every
    deciding step is listed."""
    rows = []
    for start in range(0, len(docs), batch):
        part = docs[start : start + batch]
        for doc, ex in zip(part, engine.extract(part).extractions, strict=True):
            want = {
                label: {normalise(v, doc.field_types.get(label)) for v in truth[doc.doc_id].get(label, [])}
                for label in doc.labels
            }
            doubted = {(r.label, r.value) for r in ex.reasons if r.code == ReviewCode.LOW_CONFIDENCE}
            for step in ex.alarmed:
                label = step.label or ""
                if step.value is None:
                    kind, right = "None", not want.get(label)
                else:
                    kind, right = "value", normalise(step.value, doc.field_types.get(label)) in want.get(label, set())
                probs = ex.traces[step.chunk].generation.top_probs[step.step]
                low = (step.label, step.value) in doubted
                rows.append(Step(doc.doc_id, kind, right, step.entropy, legal_entropy(probs), low))
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="corpora with truth (default: the hand-written ones)")
    parser.add_argument("--model", default="model/demo")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    engine = build_engine(EngineSettings(path=args.model, entropy_threshold=0.0))
    for path in args.files or hand_written_corpora():
        docs, truth, _ = read_corpus(path)
        print(report(str(path), len(docs), deciding_steps(engine, docs, truth, args.batch)), flush=True)


if __name__ == "__main__":
    main()
