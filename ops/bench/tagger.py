"""Word tagger benchmark: jieba's part-of-speech tagger (its Viterbi in pure Python) against ours
(model/answers/tagger.py: the Viterbi in numpy, its runs memoised, blocks of Han characters routed
by jieba-rs), on the engine benchmark's documents. Prints ms per document for each, whether their
tags agree, and the product engine's docs/s with each, in alternating rounds in one process, each
round a fresh engine (per-text tables cold, and our memo of runs emptied).

    python -m ops.bench.tagger [--docs 64] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

import jieba.posseg

from model.answers import words
from model.answers.tagger import tag_run
from model.config import EngineSettings
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from ops.bench.engine import SHAPES, build_model, long_documents, run
from ops.demo.samples import sample_documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    docs = long_documents(args.docs, 0)
    tokenizer, ours = words._segmenters()
    taggers = {"jieba": jieba.posseg.POSTokenizer(tokenizer), OURS: ours}
    texts = [d.text for d in docs]
    agree = sum(
        [(p.word, p.flag) for p in taggers["jieba"].cut(t)] == [(p.word, p.flag) for p in ours.cut(t)] for t in texts
    )
    with tempfile.TemporaryDirectory() as tmp:
        samples = [raw["text"] for raw, _ in sample_documents(300, seed=1)]
        settings = EngineSettings(
            path=str(build_model(Path(tmp), samples, SHAPES["overhead"], 4000)),
            max_new_tokens=64,
            prompts_per_forward=64,
        )
        loaded = load_model(settings)
        run(FastRunner(loaded, settings), docs, len(docs))  # what the process pays once
        tag_ms: dict[str, list[float]] = {name: [] for name in taggers}
        docs_per_s: dict[str, list[float]] = {name: [] for name in taggers}
        for _ in range(args.rounds):
            for name, tagger in taggers.items():
                tag_run.cache_clear()
                started = time.perf_counter()
                for text in texts:
                    list(tagger.cut(text))
                tag_ms[name].append((time.perf_counter() - started) * 1000 / len(texts))
                with mock.patch.object(words, "_segmenters", lambda t=tagger: (tokenizer, t)):
                    engine = FastRunner(loaded, settings)
                    docs_per_s[name].append(len(docs) / run(engine, docs, len(docs)).seconds)
    print(f"command: python -m ops.bench.tagger --docs {args.docs} --rounds {args.rounds}")
    print(f"tags identical on {agree}/{len(texts)} documents\n")
    print("| tagger | tagging ms/doc (median) | product engine docs/s (median; each round) |\n| --- | ---: | --- |")
    for name in taggers:
        rounds = ", ".join(f"{x:.1f}" for x in docs_per_s[name])
        print(
            f"| {name} | {statistics.median(tag_ms[name]):.2f} | {statistics.median(docs_per_s[name]):.1f} ({rounds}) |"
        )
    ratio = statistics.median(docs_per_s[OURS]) / statistics.median(docs_per_s["jieba"])
    print(f"\nproduct docs/s, {OURS} / jieba: {ratio:.2f}x")


OURS = "ours"


if __name__ == "__main__":
    main()
