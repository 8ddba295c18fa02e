"""Throughput per character, long documents (read in windows) beside short ones, on the same engine.

    python -m ops.bench.windows --short 30 --long 3 --threads 1

Both sets are generated documents of the kinds the long generator makes (contract, news, medical),
from a seed neither the demo model's training nor its evaluation used. It prints the command, then
per set: documents, characters, windows, seconds and milliseconds per 1,000 characters, and the
long set's cost per character over the short set's (the target is at most 1.3).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence

import msgspec
import torch

from model.build import build_engine
from model.config import EngineSettings
from model.windows.engine import WindowedEngine
from ops.corpus import generate_corpus
from ops.corpus.long import LONG_KINDS
from schemas.decode import decode_document
from schemas.messages import Document


def documents(count: int, seed: int, long: bool) -> list[Document]:
    generated = (d for d in generate_corpus(count * (1 if long else 2), seed, long=long) if d.kind in LONG_KINDS)
    raws = [msgspec.json.encode(d.raw()) for _, d in zip(range(count), generated, strict=False)]
    return [decode_document(raw, 1 << 24) for raw in raws]


def measure(engine: WindowedEngine, docs: Sequence[Document], batch: int) -> tuple[int, int, float]:
    """Characters, windows and seconds for the documents, `batch` at a time as the worker takes them."""
    windows = sum(len(engine.windows_of(d)[0]) for d in docs)
    started = time.perf_counter()
    for i in range(0, len(docs), batch):
        engine.extract(docs[i : i + batch])
    return sum(len(d.text) for d in docs), windows, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=30, help="short documents (one window each)")
    parser.add_argument("--long", type=int, default=3, help="long documents (3,000-30,000 characters)")
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32, help="documents per engine call (the worker's batch)")
    parser.add_argument("--model", default=None, help="model directory (default: SeqGPT, else the demo model)")
    args = parser.parse_args(argv)
    print("$ python -m ops.bench.windows " + shlex.join(sys.argv[1:] if argv is None else argv), flush=True)
    torch.set_num_threads(args.threads)
    settings = EngineSettings(device="cpu") if args.model is None else EngineSettings(path=args.model, device="cpu")
    engine = build_engine(settings)
    assert isinstance(engine, WindowedEngine)
    rows = {}
    for name, long in (("short", False), ("long", True)):
        docs = documents(args.long if long else args.short, args.seed, long)
        chars, windows, seconds = measure(engine, docs, args.batch)
        rows[name] = seconds * 1000 / chars * 1000
        print(
            f"{name:5}: {len(docs)} documents, {chars} characters, {windows} windows, {seconds:.1f} s, "
            f"{rows[name]:.1f} ms per 1,000 characters",
            flush=True,
        )
    print(f"long/short cost per character: {rows['long'] / rows['short']:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
