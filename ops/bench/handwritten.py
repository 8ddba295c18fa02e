"""Hand-written text through the product's engine: where a document's time goes when a trained model
reads text nobody generated (the engine benchmark reads generated text with a random model, where
the lexicon backoff hardly ever runs; here nearly every document needs it).

Per corpus, ms per document by stage (the engine's own `Timings`) and documents per second, the
engine built as the worker builds it (`model/build.py`, `--model`, batches of `--batch`), the median
of `--rounds` timed passes over every corpus, each text's caches emptied before each pass.

    python -m ops.bench.handwritten [--model model/demo] [--batch 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from model.build import build_engine, settle_heap
from model.clock import sum_timings
from model.config import EngineSettings
from ops.bench.engine import forget_texts
from ops.eval.accuracy import read_corpus
from ops.eval.peers import hand_written_corpora
from schemas.messages import Timings

STAGES = ("tokenize_ms", "prefill_ms", "decode_ms", "postprocess_ms", "backoff_ms")


def timed_pass(engine, docs: list, batch: int) -> tuple[float, Timings]:
    """Seconds for every document in batches, and the engine's summed timings."""
    forget_texts()
    timings = []
    started = time.perf_counter()
    for start in range(0, len(docs), batch):
        timings.append(engine.extract(docs[start : start + batch]).timings)
    return time.perf_counter() - started, sum_timings(timings)


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
    runs: dict[str, list[tuple[float, Timings]]] = {name: [] for name in corpora}
    for _ in range(args.rounds):
        for name, docs in corpora.items():
            runs[name].append(timed_pass(engine, docs, args.batch))
    print(f"\nmodel {args.model}, batch {args.batch}, median of {args.rounds} passes; ms per document\n")
    print("| corpus | documents | docs/s | " + " | ".join(s.removesuffix("_ms") for s in STAGES) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in STAGES) + " |")
    for name, docs in corpora.items():
        seconds, timings = sorted(runs[name], key=lambda run: run[0])[(len(runs[name]) - 1) // 2]
        cells = [f"{getattr(timings, stage) / len(docs):.1f}" for stage in STAGES]
        print(f"| {name} | {len(docs)} | {len(docs) / seconds:.2f} | " + " | ".join(cells) + " |")
    all_seconds = [sum(runs[name][i][0] for name in corpora) for i in range(args.rounds)]
    total = sum(len(docs) for docs in corpora.values())
    print(f"\nevery corpus: {total / statistics.median(all_seconds):.2f} docs/s (median pass)")


if __name__ == "__main__":
    main()
