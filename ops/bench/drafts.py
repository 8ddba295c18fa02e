"""Copy-draft benchmark on a model that extracts: the shipped demo model (model/demo/) decoding
held-out generated documents with drafts on and off, constrained as the product decodes. Prints
forward passes per document and per answer, docs/s, and whether the outputs are identical.

    python -m ops.bench.drafts [--model model/demo --docs 64 --batch 16]

The random-weight model of ops/bench/engine.py copies nothing, so drafts are mostly rejected there;
this is the case drafts are for.
"""

from __future__ import annotations

import argparse
import time

import msgspec
import torch

from model.config import EngineSettings
from model.engine import Extractor
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from model.runner.protocol import Passes
from ops.corpus import generate_corpus
from ops.train.demo_model import DEMO_DIR, EVAL_SEED
from schemas.messages import Document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(DEMO_DIR.relative_to(DEMO_DIR.parent.parent)))
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--draft-tokens", type=int, default=EngineSettings().draft_tokens)
    args = parser.parse_args()

    docs = [
        Document(doc_id=g.doc_id, text=g.text, task="extract", labels=tuple(g.values()))
        for g in generate_corpus(args.docs, seed=EVAL_SEED)
    ]
    settings = EngineSettings(path=args.model, draft_tokens=args.draft_tokens)
    loaded = load_model(settings)
    print(
        f"command: python -m ops.bench.drafts --model {args.model} --docs {args.docs} --batch {args.batch} "
        f"--draft-tokens {args.draft_tokens}"
    )
    print(
        f"model: {args.model}; {len(docs)} held-out documents (generate_corpus seed {EVAL_SEED}), constrained, "
        f"batch {args.batch}, drafts of up to {args.draft_tokens} tokens, {loaded.dtype} on {loaded.device}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        "\n| drafts | docs/s | batch forward passes/doc | decode passes/answer | tokens/answer | decode s |"
        "\n| --- | ---: | ---: | ---: | ---: | ---: |"
    )
    outputs, per_answer, per_doc = {}, {}, {}
    for draft in (False, True):
        engine = Extractor(FastRunner(loaded, msgspec.structs.replace(settings, copy_draft="on" if draft else "off")))
        engine.extract(docs[:2])
        passes = Passes()
        started = time.perf_counter()
        tokens, decode_ms, outputs[draft] = 0, 0.0, []
        for start in range(0, len(docs), args.batch):
            result = engine.extract(docs[start : start + args.batch])
            tokens += result.generated_tokens
            decode_ms += result.timings.decode_ms
            passes += result.passes
            outputs[draft] += [[t.generation.token_ids for t in e.traces] for e in result.extractions]
        seconds = time.perf_counter() - started
        per_doc[draft] = passes.forward / len(docs)
        per_answer[draft] = passes.answer_passes / passes.answers
        print(
            f"| {'on' if draft else 'off'} | {len(docs) / seconds:.2f} | {per_doc[draft]:.1f} "
            f"| {per_answer[draft]:.1f} | {tokens / passes.answers:.1f} | {decode_ms / 1000:.2f} |"
        )
    same = sum(a == b for a, b in zip(outputs[False], outputs[True], strict=True))
    print(f"\nidentical token outputs (drafts on / off): {same}/{len(docs)} documents")
    print(
        f"fewer forward passes with drafts: {per_answer[False] / per_answer[True]:.2f}x per answer, "
        f"{per_doc[False] / per_doc[True]:.2f}x per document in batches of {args.batch}"
    )


if __name__ == "__main__":
    main()
