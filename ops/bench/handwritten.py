"""Hand-written text through the product's engine: where a document's time goes when a trained model
reads text nobody generated (the engine benchmark reads generated text with a random model, where
the lexicon backoff hardly ever runs; here nearly every document needs it).

Per corpus, ms per document by stage (the engine's own `Timings`, the backoff's split into LAC and
the model's scoring), the share of documents LAC read, and documents per second, the
engine built as the worker builds it (`model/build.py`, `--model`, batches of `--batch`), the median
of `--rounds` timed passes over every corpus, each text's caches emptied before each pass.

    python -m ops.bench.handwritten [--model model/demo] [--batch 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from model.answers.backoff import BackoffCost
from model.build import build_engine, settle_heap
from model.clock import sum_timings
from model.config import EngineSettings
from ops.bench.engine import forget_texts, median_run
from ops.eval.accuracy import read_corpus
from ops.eval.peers import hand_written_corpora
from schemas.messages import Timings

STAGES = ("tokenize_ms", "prefill_ms", "decode_ms", "postprocess_ms", "backoff_ms")


@dataclass
class Pass:
    seconds: float
    timings: Timings
    backoff: BackoffCost


def timed_pass(engine, docs: list, batch: int) -> Pass:
    """Every document in batches: seconds, the engine's summed timings and the backoff's cost."""
    forget_texts()
    timings, backoff = [], BackoffCost()
    started = time.perf_counter()
    for start in range(0, len(docs), batch):
        result = engine.extract(docs[start : start + batch])
        timings.append(result.timings)
        backoff += result.backoff or BackoffCost()
    return Pass(time.perf_counter() - started, sum_timings(timings), backoff)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="model/demo")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("corpora", nargs="*", type=Path, help="default: the hand-written ones")
    args = parser.parse_args()
    print("command: python -m ops.bench.handwritten " + " ".join(sys.argv[1:]))
    engine = build_engine(EngineSettings(path=args.model))
    settle_heap()
    corpora = {path.stem: read_corpus(path)[0] for path in args.corpora or hand_written_corpora()}
    for docs in corpora.values():
        engine.extract(docs[:2])  # first calls (allocation, LAC's session) fall on no timed pass
    runs: dict[str, list[Pass]] = {name: [] for name in corpora}
    for _ in range(args.rounds):
        for name, docs in corpora.items():
            runs[name].append(timed_pass(engine, docs, args.batch))
    print(f"\nmodel {args.model}, batch {args.batch}, median of {args.rounds} passes; ms per document\n")
    print("| corpus | documents | docs/s | " + " | ".join(s.removesuffix("_ms") for s in STAGES) + " | LAC | scoring |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in STAGES) + " | ---: | ---: |")
    medians = {name: median_run(passes) for name, passes in runs.items()}
    for name, docs in corpora.items():
        run, n = medians[name], len(docs)
        cells = [f"{getattr(run.timings, stage) / n:.1f}" for stage in STAGES]
        backoff = [f"{run.backoff.lexicon_ms / n:.1f}", f"{run.backoff.score_ms / n:.1f}"]
        print(f"| {name} | {n} | {n / run.seconds:.2f} | " + " | ".join(cells + backoff) + " |")
    all_seconds = [sum(runs[name][i].seconds for name in corpora) for i in range(args.rounds)]
    total = sum(len(docs) for docs in corpora.values())
    print(f"\nevery corpus: {total / statistics.median(all_seconds):.2f} docs/s (median pass)")
    print("\nThe backoff (LAC: its entities and the cross-checks; scoring: the model choosing among candidates):\n")
    print("| corpus | documents LAC read | labels backed off | candidates scored |")
    print("| --- | ---: | ---: | ---: |")
    for name in corpora:
        cost = medians[name].backoff
        share = f"{cost.lexicon_documents} of {cost.documents} ({100 * cost.lexicon_documents / cost.documents:.0f}%)"
        print(f"| {name} | {share} | {cost.labels} | {cost.candidates} |")


if __name__ == "__main__":
    main()
