"""Copy-draft benchmark on a model that copies: a BLOOM trained here to memorise a few generated
documents (model/train.py, the tests' memorised recipe), decoding them and unseen ones with drafts
on and off. Prints forward passes per document, docs/s, and whether the outputs are identical.

    python -m ops.bench_drafts [--memorised 8 --unseen 56 --batch 16]

The random-weight model of ops/bench_engine.py copies nothing, so drafts are mostly rejected there;
this is the case drafts are for.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import msgspec
import torch

from model.config import EngineSettings
from model.fast import FastEngine
from model.loading import load_model
from model.train import Recipe, train_bloom
from ops.corpus import generate_corpus
from schemas.decode import decode_document
from schemas.messages import Document

RECIPE = Recipe(steps=300, lr=8e-3, batch_size=8, hidden_size=64, n_layer=2, n_head=4, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memorised", type=int, default=8)
    parser.add_argument("--unseen", type=int, default=56)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=160)
    args = parser.parse_args()

    seen = list(generate_corpus(args.memorised, seed=2024, brief=True))
    unseen = list(generate_corpus(args.unseen, seed=31, brief=True))
    labelled = [(decode_document(msgspec.json.encode(d.raw()), 1 << 20), d.values()) for d in seen]
    docs = [Document(doc_id=g.doc_id, text=g.text, task="extract", labels=tuple(g.values())) for g in seen + unseen]
    with tempfile.TemporaryDirectory() as tmp:
        directory = train_bloom(Path(tmp), labelled, RECIPE)
        settings = EngineSettings(path=str(directory), max_new_tokens=args.new_tokens, prompts_per_forward=64)
        loaded = load_model(settings)
        print(
            f"command: python -m ops.bench_drafts --memorised {args.memorised} --unseen {args.unseen} "
            f"--batch {args.batch} --new-tokens {args.new_tokens}"
        )
        print(
            f"model: memoriser hidden {RECIPE.hidden_size} x {RECIPE.n_layer} layers trained on {len(seen)} "
            f"documents; {len(docs)} documents ({len(seen)} memorised), fp32 on {loaded.device}, "
            f"{torch.get_num_threads()} threads"
        )
        print("\n| drafts | docs/s | forward passes/doc | generated tokens/doc | decode s |")
        print("| --- | ---: | ---: | ---: | ---: |")
        outputs = {}
        for draft in (False, True):
            engine = FastEngine(loaded, msgspec.structs.replace(settings, copy_draft="on" if draft else "off"))
            engine.extract(docs[:2])
            engine.forward_passes = 0
            started = time.perf_counter()
            tokens, decode_ms, outputs[draft] = 0, 0.0, []
            for start in range(0, len(docs), args.batch):
                result = engine.extract(docs[start : start + args.batch])
                tokens += result.generated_tokens
                decode_ms += result.timings.decode_ms
                outputs[draft] += [[t.generation.token_ids for t in e.traces] for e in result.extractions]
            seconds = time.perf_counter() - started
            print(
                f"| {'on' if draft else 'off'} | {len(docs) / seconds:.2f} | {engine.forward_passes / len(docs):.1f} "
                f"| {tokens / len(docs):.1f} | {decode_ms / 1000:.2f} |"
            )
    same = sum(a == b for a, b in zip(outputs[False], outputs[True], strict=True))
    print(f"\nidentical token outputs (drafts on / off): {same}/{len(docs)} documents")


if __name__ == "__main__":
    main()
