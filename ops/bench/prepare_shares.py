"""`python -m ops.bench.prepare_shares`: how much text is worth a trip to a preparing process
(model/prepare_pool.py, `SEQSTREAM_MODEL__PREPARE_SHARE_CHARS`).

Batches of k of the engine benchmark's documents (300-1000 characters) are prepared in the engine's
process alone, then with one preparing process taking half the text, each text's tables from cold
(the tagger's memo of unknown runs warm in both, as in a worker); each figure is the median of the
rounds, the two taken in turn so that a slow spell falls on both.
"""

from __future__ import annotations

import argparse
import statistics
import time

from model.answers.tagger import tag_run
from model.build import settle_heap
from model.clock import ms_since
from model.config import EngineSettings
from model.engine import prepare
from model.prepare_pool import PreparePool
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from ops.bench.engine import forget_texts, long_documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="model/demo")
    parser.add_argument("--sizes", default="1,2,4,8,16,32", help="documents per batch")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    sizes = [int(k) for k in args.sizes.split(",")]
    settings = EngineSettings(path=args.model, prepare_share_chars=1)
    runner = FastRunner(load_model(settings), settings)
    docs = long_documents(max(sizes) * args.rounds, seed=0)

    def timed(prepare_with, batch) -> float:
        # Each text's caches cleared, the tagger's memo of unknown runs kept (a worker's and its
        # preparing processes' are warm; a process's own cannot be cleared from here).
        forget_texts(keep=(tag_run,))
        runner.constrainer.forget_documents()
        started = time.perf_counter()
        prepare_with(runner, batch)
        return ms_since(started)

    command = f"--model {args.model} --sizes {args.sizes} --rounds {args.rounds}"
    print(f"command: python -m ops.bench.prepare_shares {command}")
    print("\n| documents | characters | alone ms | one preparing process ms | alone / with |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    with PreparePool(settings, runner.tokenizer, 1) as pool:
        timed(prepare, docs)
        timed(pool.prepare, docs)
        settle_heap()
        for k in sizes:
            alone, pooled, chars = [], [], []
            for r in range(args.rounds):
                batch = docs[r * k : (r + 1) * k]
                chars.append(sum(len(d.text) for d in batch))
                alone.append(timed(prepare, batch))
                pooled.append(timed(pool.prepare, batch))
            a, p = statistics.median(alone), statistics.median(pooled)
            print(f"| {k} | {statistics.median(chars):.0f} | {a:.1f} | {p:.1f} | {a / p:.2f}x |")


if __name__ == "__main__":
    main()
