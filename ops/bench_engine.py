"""Engine benchmark: the fast engine against the reference engine, same documents, same batches,
one run. Prints docs/s, generated tokens/s, per-stage time and the ratio, and checks that both
produced the same outputs.

    python -m ops.bench_engine [--hidden 256 --layers 4 --vocab 250880 --docs 32 --batch 16]

The model is a random-weight BLOOM of the given shape (SeqGPT-560M's vocabulary by default, as the
LM head's cost is part of serving it), with a tokenizer trained on the sample documents.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import torch

from model.answers.validate import Extraction
from model.config import EngineSettings
from model.engine import ms_since, sum_timings
from model.runner.fast import FastEngine
from model.runner.loading import load_model
from model.runner.reference import ReferenceEngine
from model.tiny import build_tiny_bloom
from ops.oracle.constraints import SourceIndex
from ops.samples import sample_documents
from schemas.decode import decode_document
from schemas.messages import Document, Timings

STAGES = ("tokenize_ms", "prefill_ms", "decode_ms", "constrain_ms", "postprocess_ms")


def long_documents(count: int, seed: int, min_chars: int = 300, max_chars: int = 1000) -> list[Document]:
    """Sample texts strung together to 300-1000 characters, asking for 6-12 labels each."""
    rng = random.Random(seed)
    pool = [raw for raw, _ in sample_documents(count * 12, seed=seed)]
    labels = sorted({label for raw in pool for label in _field_set_labels(raw["field_set"])})
    docs = []
    for i in range(count):
        target = rng.randint(min_chars, max_chars)
        text = ""
        while len(text) < target:
            text += rng.choice(pool)["text"]
        raw = {"doc_id": f"bench-{i}", "text": text[:target], "labels": rng.sample(labels, rng.randint(6, 12))}
        docs.append(decode_document(msgspec.json.encode(raw), 1 << 20))
    return docs


def _field_set_labels(name: str) -> tuple[str, ...]:
    from schemas.field_sets import FIELD_SETS

    return FIELD_SETS[name]


@dataclass
class Run:
    extractions: list[Extraction]
    timings: Timings
    tokens: int
    seconds: float
    steps: int  # decode steps, each one forward pass of the whole batch


def run(engine, docs: list[Document], batch: int) -> Run:
    extractions, timings, tokens, steps = [], [], 0, 0
    started = time.perf_counter()
    for start in range(0, len(docs), batch):
        result = engine.extract(docs[start : start + batch])
        extractions += result.extractions
        tokens += result.generated_tokens
        timings.append(result.timings)
        # One group per batch here (prompts_per_forward covers it): its steps are its longest row's.
        steps += max(len(t.generation.token_ids) for e in result.extractions for t in e.traces)
    return Run(extractions, sum_timings(timings), tokens, time.perf_counter() - started, steps)


def per_document_index_ms(engine: FastEngine, docs: list[Document]) -> float:
    """Mean time to build a document's (position, token) matches, paid once per document (built
    afresh here: the engine's constrainer keeps the indexes of the documents it has just decoded)."""
    vocab, device = engine.constrainer.vocab, engine.constrainer.device
    started = time.perf_counter()
    for doc in docs:
        SourceIndex(doc.text, vocab, device)
    return ms_since(started) / len(docs)


def comparable(extraction: Extraction) -> dict:
    """What a record is made of, less the float signals (they agree to ~1e-6, not to the bit)."""
    e = extraction
    return {
        "fields": {label: [(s.text, s.start) for s in spans] for label, spans in e.fields.items()},
        "classes": e.classes,
        "reasons": [(r.code, r.label, r.value) for r in e.reasons if r.code.value != "low_confidence"],
        "alarmed_steps": e.alarmed_steps,
        "alarm_tokens": [(a.chunk, a.step, a.chosen.token_id) for a in e.alarms],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=250_880)
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    docs = long_documents(args.docs, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        texts = [raw["text"] for raw, _ in sample_documents(300, seed=1)]
        directory = build_tiny_bloom(
            Path(tmp),
            texts,
            hidden_size=args.hidden,
            n_layer=args.layers,
            n_head=args.heads,
            vocab_size=4000,
            # BLOOM's default init gives near-uniform logits, where 1e-6 of rounding flips near-ties.
            initializer_range=0.3,
        )
        _widen_vocab(directory, args.vocab)
        settings = EngineSettings(path=str(directory), max_new_tokens=args.new_tokens, prompts_per_forward=64)
        loaded = load_model(settings)
        stepwise = msgspec.structs.replace(settings, copy_draft="off")
        engines = {
            "reference": ReferenceEngine(loaded, settings),
            "fast, drafts": FastEngine(loaded, msgspec.structs.replace(settings, copy_draft="on")),
            "fast, no drafts": FastEngine(loaded, stepwise),
            "fast, no drafts, unconstrained": FastEngine(loaded, msgspec.structs.replace(stepwise, constrained=False)),
        }
        # Warm-up on a slice, so first-call costs (allocation, kernel selection) are not measured.
        for engine in engines.values():
            engine.extract(docs[: min(2, len(docs))])
            if isinstance(engine, FastEngine):
                engine.forward_passes = 0
        results = {name: run(engine, docs, args.batch) for name, engine in engines.items()}
        index_ms = per_document_index_ms(engines["fast, drafts"], docs)

    prompts = sum(len(e.fields) for e in results["reference"].extractions)
    print(f"command: python -m ops.bench_engine {' '.join(_argv(args))}")
    print(
        f"model: random BLOOM hidden {args.hidden} x {args.layers} layers, {args.heads} heads, vocab {args.vocab:,}; "
        f"{len(docs)} documents of 300-1000 characters, 6-12 labels ({prompts} labels in all), batch {args.batch}, "
        f"{args.new_tokens} new tokens per prompt, fp32 on {loaded.device}, {torch.get_num_threads()} threads"
    )
    print(f"fast engine attention: {engines['fast, no drafts'].info.attention}")
    stage_names = " | ".join(s.removesuffix("_ms") + " s" for s in STAGES)
    print(f"\n| engine | docs/s | tokens/s | forward passes/doc | {stage_names} | total s |")
    print("|" + " --- |" * (5 + len(STAGES)))
    rates = {}
    for name, r in results.items():
        rates[name] = len(docs) / r.seconds
        stages = " | ".join(f"{getattr(r.timings, s) / 1000:.2f}" for s in STAGES)
        engine = engines[name]
        shown = f"{engine.forward_passes / len(docs):.1f}" if isinstance(engine, FastEngine) else "-"
        print(f"| {name} | {rates[name]:.2f} | {r.tokens / r.seconds:.0f} | {shown} | {stages} | {r.seconds:.2f} |")
    pairs = zip(results["reference"].extractions, results["fast, drafts"].extractions, strict=True)
    same = [comparable(a) == comparable(b) for a, b in pairs]
    speed_up = rates["fast, no drafts"] / rates["reference"]
    print(f"\nspeed-up (docs/s, fast without drafts, the CPU default / reference): {speed_up:.2f}x")
    print(f"identical outputs (both constrained): {sum(same)}/{len(same)} documents")
    pairs = zip(results["fast, drafts"].extractions, results["fast, no drafts"].extractions, strict=True)
    drafted = [comparable(a) == comparable(b) for a, b in pairs]
    print(f"identical outputs (drafts on / off): {sum(drafted)}/{len(drafted)} documents")
    fast = results["fast, no drafts"]
    mask_ms = fast.timings.constrain_ms / fast.steps
    step_ms = (fast.timings.decode_ms - fast.timings.constrain_ms) / fast.steps
    print(
        f"grammar mask per decode step (batch {args.batch}, no drafts): {mask_ms:.2f} ms beside {step_ms:.2f} ms "
        f"for the rest of the step ({100 * mask_ms / step_ms:.1f}%); per-document match index: {index_ms:.1f} ms"
    )


def _widen_vocab(directory: Path, vocab: int) -> None:
    """Give the checkpoint SeqGPT's vocabulary size: rows beyond the tokenizer's are never produced
    by it but cost the LM head and softmax exactly what they cost in the real model."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory)
    if vocab > model.config.vocab_size:
        model.resize_token_embeddings(vocab, mean_resizing=False)
        model.save_pretrained(directory)


def _argv(args: argparse.Namespace) -> list[str]:
    return [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()]


if __name__ == "__main__":
    main()
