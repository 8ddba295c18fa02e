"""`python -m ops.eval.alarm [FILE ...] [--model DIR]`: what the entropy alarm would catch, measured on
every step that decided a record, with two signals side by side.

The product alarms on the entropy of the model's full next-token distribution (model/answers/validate.py).
On a character-level model that is high at a rare character it must copy (a rare surname's first
character: the legal choice 0.6-0.98 and right), so it sends right records to review. Beside it, the
entropy among the tokens the grammar left legal, which is what decided the record: from each step's
runners-up (their probabilities are renormalised over the legal tokens, model/signals.py), the mass
beyond them counted as one lump, so it is a lower bound.

For each corpus with truth (default: the hand-written ones), deciding steps by what they decided (a
value, or a label's None) and whether that was right, and how many each signal flags; then the
documents each would alarm.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

from model.build import build_engine
from model.config import EngineSettings
from ops.eval.accuracy import normalise, read_corpus
from ops.eval.peers import hand_written_corpora

FULL = 2.5  # the product's threshold, nats
LEGAL = (0.3, 0.6, 1.0)


def legal_entropy(probs: Sequence[float]) -> float:
    """Entropy (nats) of a distribution known by its largest probabilities, the rest as one lump."""
    kept = [p for p in probs if p > 0]
    rest = max(0.0, 1.0 - sum(kept))
    return -sum(p * math.log(p) for p in kept) - (rest * math.log(rest) if rest > 0 else 0.0)


def deciding_steps(engine, docs, truth, batch: int) -> list[tuple[str, str, bool, float, float]]:
    """(doc id, "value" or "None", right, full entropy, legal entropy) per deciding step. `engine`
    must alarm at 0 nats, so that every deciding step is listed."""
    rows = []
    for start in range(0, len(docs), batch):
        part = docs[start : start + batch]
        for doc, ex in zip(part, engine.extract(part).extractions, strict=True):
            want = {
                label: {normalise(v, doc.field_types.get(label)) for v in truth[doc.doc_id].get(label, [])}
                for label in doc.labels
            }
            for step in ex.alarmed:
                label = step.label or ""
                if step.value is None:
                    kind, right = "None", not want.get(label)
                else:
                    kind, right = "value", normalise(step.value, doc.field_types.get(label)) in want.get(label, set())
                probs = ex.traces[step.chunk].generation.top_probs[step.step]
                rows.append((doc.doc_id, kind, right, step.entropy, legal_entropy(probs)))
    return rows


def report(name: str, documents: int, rows: list[tuple[str, str, bool, float, float]]) -> str:
    lines = [
        f"== {name}: {len(rows)} deciding steps in {documents} documents",
        f"   decided       steps  full>{FULL}" + "".join(f"  legal>{t}" for t in LEGAL),
    ]
    for kind in ("value", "None"):
        for right in (True, False):
            chosen = [r for r in rows if r[1] == kind and r[2] == right]
            if chosen:
                flagged = [sum(r[3] > FULL for r in chosen)] + [sum(r[4] > t for r in chosen) for t in LEGAL]
                label = f"{kind} {'right' if right else 'wrong'}"
                lines.append(f"   {label:12s} {len(chosen):6d}  " + "".join(f"{n:9d}" for n in flagged))
    alarmed = [len({r[0] for r in rows if r[3] > FULL})] + [len({r[0] for r in rows if r[4] > t}) for t in LEGAL]
    lines.append("   documents alarmed    " + "".join(f"{n:9d}" for n in alarmed))
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
