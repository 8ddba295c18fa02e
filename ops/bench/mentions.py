"""Typed-mention benchmark (model/values/mentions.py): ms per document to find a text's dates and
amounts with their whole patterns and with the pattern `pattern_for` picks (without the English
alternatives where the text names no month or currency), and whether both find the same mentions; on
the engine benchmark's documents and on the hand-written corpora. Best of the rounds, the two ways in
turn within each round.

    python -m ops.bench.mentions [--docs 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from model.values import mentions as found_in
from ops.bench.engine import long_documents
from ops.eval.accuracy import read_corpus
from ops.eval.peers import hand_written_corpora

KINDS = ("date", "amount")


def _ms_per_text(texts: list[str], pick: Callable[[str, str], object]) -> dict[str, float]:
    out = {}
    for kind in KINDS:
        started = time.perf_counter()
        for text in texts:
            found_in._matched(kind, pick(kind, text), text)
        out[kind] = (time.perf_counter() - started) * 1000 / len(texts)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    corpora = {
        f"engine bench ({args.docs} documents)": [d.text for d in long_documents(args.docs, 0)],
        "hand-written corpora": [d.text for path in hand_written_corpora() for d in read_corpus(path)[0]],
    }
    ways: dict[str, Callable[[str, str], object]] = {
        "whole pattern": lambda kind, _text: found_in._PATTERNS[kind],
        "pattern_for": found_in.pattern_for,
    }
    print(f"command: python -m ops.bench.mentions --docs {args.docs} --rounds {args.rounds}")
    print("| texts | kind | whole pattern ms/doc | pattern_for ms/doc | same mentions |")
    print("| --- | --- | ---: | ---: | --- |")
    for name, texts in corpora.items():
        best = {way: dict.fromkeys(KINDS, float("inf")) for way in ways}
        for _ in range(args.rounds):
            for way, pick in ways.items():
                for kind, ms in _ms_per_text(texts, pick).items():
                    best[way][kind] = min(best[way][kind], ms)
        for kind in KINDS:
            same = all(
                found_in._matched(kind, found_in._PATTERNS[kind], t)
                == found_in._matched(kind, found_in.pattern_for(kind, t), t)
                for t in texts
            )
            whole, picked = best["whole pattern"][kind], best["pattern_for"][kind]
            print(f"| {name} | {kind} | {whole:.3f} | {picked:.3f} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
