"""`python -m ops.bench.kv_layout`: the model's decode step with its KV cache heads first (the
product's layout on every backend but flash-attn's) against positions first (flash-attn's), on
random BLOOMs of a few depths, rows and contexts (model/runner/kv_cache.py).

Each figure is the median of the rounds of `model_ms_per_step` (ops/bench/engine.py), the two
layouts timed in turn within each round, so that a slow spell falls on both.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from model.config import EngineSettings
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from ops.bench.engine import model_ms_per_step
from ops.demo.samples import sample_documents
from ops.train.tiny import build_tiny_bloom


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", default="2,24", help="depths of the random models")
    parser.add_argument("--rows", default="8,64")
    parser.add_argument("--context", type=int, default=300, help="cached positions before the steps")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    command = (
        f"--hidden {args.hidden} --heads {args.heads} --layers {args.layers} --rows {args.rows} "
        f"--context {args.context} --steps {args.steps} --rounds {args.rounds}"
    )
    print(f"command: python -m ops.bench.kv_layout {command}")
    print("\n| layers | rows | positions first ms/step | heads first ms/step | speed-up |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    texts = [raw["text"] for raw, _ in sample_documents(200, seed=1)]
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(n) for n in args.layers.split(",")]:
            directory = build_tiny_bloom(
                Path(tmp) / f"l{layers}",
                texts,
                seed=0,
                vocab_size=4000,
                hidden_size=args.hidden,
                n_layer=layers,
                n_head=args.heads,
            )
            settings = EngineSettings(path=str(directory))
            # Eager attention, whatever the machine has: flash-attn reads only its own layout.
            runner = FastRunner(load_model(settings), settings, backend="eager")
            for rows in [int(n) for n in args.rows.split(",")]:
                timed = {True: [], False: []}
                for _ in range(args.rounds):
                    for heads_first in (False, True):
                        ms = model_ms_per_step(runner, rows, args.context, args.steps, heads_first)
                        timed[heads_first].append(ms)
                before, after = statistics.median(timed[False]), statistics.median(timed[True])
                print(f"| {layers} | {rows} | {before:.2f} | {after:.2f} | {before / after:.2f}x |")


if __name__ == "__main__":
    main()
