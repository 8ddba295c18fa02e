"""`python -m ops.eval.gate`: why records go to review, measured per corpus (the gate's calibration).

For each corpus (default: the hand-written ones in ops/corpus), the product's records are read
against the truth and tabulated:

- routing: values found, records to fields, and of the values expected in fields-routed records the
  share wrong or missing (what `seqstream-ops eval` prints), plus the records whose every value is
  right (no gate can route more records to fields with nothing wrong);
- review codes: records per code, and the labels the per-label codes name;
- entropy alarms: the alarmed deciding steps, by whether the value they decided is right, and how
  many of those values the confidence gate flags too;
- the lexicon backoff's picks (model/answers/backoff.py), by source (a LAC tag or a typed detector),
  one candidate or several, right or wrong, and which of them the check vouched for
  (model/answers/vouch.py, whose table comes from this one);
- answers: every label of every record by how it was answered (the model's value, its None, or the
  backoff's pick, with the review codes on that label) and whether it holds the true values (right),
  misses one (missing) or holds only one too many (extra): what a gate has to tell apart;
- the ceiling: the most records a perfect gate could send to fields at the 2% bar, from each record's
  wrong or missing values. Above it, only the model can take a corpus.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from model.answers.validate import Extraction
from model.build import build_engine
from model.config import EngineSettings
from ops.eval.accuracy import normalise, read_corpus
from ops.eval.peers import hand_written_corpora
from schemas.messages import Document, ReviewCode


def wanted(doc: Document, truth) -> dict[str, set[str]]:
    """Per label of `doc`, its true values, normalised as the eval compares them."""
    return {
        label: {normalise(v, doc.field_types.get(label)) for v in truth[doc.doc_id].get(label, [])}
        for label in doc.labels
    }


def held(doc: Document, ex: Extraction) -> dict[str, set[str]]:
    """Per label of `doc`, the values its record `ex` holds, normalised as the eval compares them."""
    return {
        label: {normalise(s.text, doc.field_types.get(label)) for s in ex.fields.get(label, [])} for label in doc.labels
    }


def shortfall(want: dict[str, set[str]], got: dict[str, set[str]]) -> tuple[int, int]:
    """A record's values expected, and of them the ones it does not hold (wrong or missing)."""
    return sum(len(w) for w in want.values()), sum(len(w - got[label]) for label, w in want.items())


def doubted(ex: Extraction) -> set[tuple[str | None, str | None]]:
    """The (label, value) pairs the confidence gate flagged."""
    return {(r.label, r.value) for r in ex.reasons if r.code == ReviewCode.LOW_CONFIDENCE}


def measure(docs: Sequence[Document], extractions: Sequence[Extraction], truth) -> dict[str, Counter]:
    out = {name: Counter() for name in ("routing", "codes", "labels", "alarms", "picks", "answers")}
    records: list[tuple[int, int]] = []
    for doc, ex in zip(docs, extractions, strict=True):
        want = wanted(doc, truth)
        got = held(doc, ex)
        expected, missing = shortfall(want, got)
        records.append((expected, missing))
        for label in doc.labels:
            outcome = "missing" if want[label] - got[label] else "extra" if got[label] - want[label] else "right"
            out["answers"][f"{answer_kind(ex, label):40s} {outcome}"] += 1
        routing = out["routing"]
        routing["documents"] += 1
        routing["values"] += expected
        routing["found"] += sum(len(got[label] & want[label]) for label in doc.labels)
        routing["all right"] += all(got[label] == want[label] for label in doc.labels)
        if not ex.needs_review:
            routing["to fields"] += 1
            routing["expected in fields"] += expected
            routing["wrong or missing in fields"] += missing
        for code in {r.code.value for r in ex.reasons}:
            out["codes"][code] += 1
        for r in ex.reasons:
            if r.label is not None:
                out["labels"][f"{r.code.value} {r.label}"] += 1
        low = doubted(ex)
        for step in ex.alarmed:
            if step.value is None:
                out["alarms"]["a label's None-or-value step"] += 1
                continue
            right = normalise(step.value, doc.field_types.get(step.label or "")) in want.get(step.label or "", set())
            also = "also low_confidence" if (step.label, step.value) in low else "alarm alone"
            out["alarms"][f"value {'right' if right else 'wrong'}, {also}"] += 1
        backed_off = {r.label for r in ex.reasons if r.code == ReviewCode.LEXICON_BACKOFF}
        for label, candidates in ex.candidates.items():
            pick = next(c for c in candidates if c.picked)
            right = normalise(pick.text, doc.field_types.get(label)) in want[label]
            shape = "one candidate" if len(candidates) == 1 else "several"
            where = "review" if label in backed_off else "fields"
            out["picks"][f"{pick.source:10s} {shape:13s} {where:6s} {'right' if right else 'wrong'}"] += 1
    out["routing"]["ceiling"] = ceiling(records)
    return out


def answer_kind(ex: Extraction, label: str) -> str:
    """How a label was answered: the model's value or None, or the backoff's pick, with the per-label
    review codes on it (lexicon_backoff and unclaimed_value left out: they come with every pick)."""
    codes = sorted(
        {r.code.value for r in ex.reasons if r.label == label}
        - {ReviewCode.LEXICON_BACKOFF.value, ReviewCode.UNCLAIMED_VALUE.value}
    )
    kind = "backoff pick" if label in ex.candidates else "model's value" if ex.fields.get(label) else "model's None"
    return " + ".join([kind, *codes])


def ceiling(records: Sequence[tuple[int, int]], bar: float = 0.02) -> int:
    """The most records any gate could send to fields with at most `bar` of their expected values
    wrong or missing, given each record's (values expected, wrong or missing): the records with the
    fewest missing first, the larger of equals first."""
    expected = missing = taken = 0
    for want, miss in sorted(records, key=lambda r: (r[1], -r[0])):
        if missing + miss > bar * (expected + want):
            break
        expected, missing, taken = expected + want, missing + miss, taken + 1
    return taken


def report(name: str, counts: dict[str, Counter]) -> str:
    r = counts["routing"]
    lines = [
        f"== {name}",
        f"documents {r['documents']}, to fields {r['to fields']}, every value right {r['all right']}; "
        f"values found {r['found']}/{r['values']} ({r['found'] / max(r['values'], 1):.1%}); "
        f"wrong or missing in fields-routed records {r['wrong or missing in fields']}/{r['expected in fields']}; "
        f"a perfect gate's ceiling at <= 2% wrong or missing: {r['ceiling']} records",
    ]
    for title in ("codes", "labels", "alarms", "picks", "answers"):
        lines.append(f"-- {title}")
        lines += [f"  {n:4d}  {key}" for key, n in sorted(counts[title].items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines)


def corpus_runs(
    description: str, argv: Sequence[str] | None = None, **settings: Any
) -> Iterator[tuple[Path, list[Document], dict, list[Extraction]]]:
    """The command line the gate's tools share (corpora with truth, default the hand-written ones;
    --model; --batch), and per corpus its documents, truth and the records of an engine built with
    `settings`, extracted batch by batch."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("files", nargs="*", type=Path, help="corpora with truth (default: the hand-written ones)")
    parser.add_argument("--model", default="model/demo")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    engine = build_engine(EngineSettings(path=args.model, **settings))
    for path in args.files or hand_written_corpora():
        docs, truth, _ = read_corpus(path)
        extractions = []
        for start in range(0, len(docs), args.batch):
            extractions += engine.extract(docs[start : start + args.batch]).extractions
        yield path, docs, truth, extractions


def main(argv: Sequence[str] | None = None) -> None:
    for path, docs, truth, extractions in corpus_runs(__doc__.splitlines()[0], argv):
        print(report(str(path), measure(docs, extractions, truth)), flush=True)


if __name__ == "__main__":
    main()
