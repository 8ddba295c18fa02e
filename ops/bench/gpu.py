"""GPU check for the fast engine: SeqGPT-560M's architecture (random weights of the exact shapes)
in BF16, against the reference engine, at several batch sizes. Run through ops/bench/gpu_check.sh.

Prints the attention backend, docs/s and per-document latency per batch size, peak GPU memory,
the ratio to the reference engine, and the share of documents whose output is identical across
batch sizes 1, 8 and 64.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import torch
from transformers import BloomConfig, BloomForCausalLM

from model.config import EngineSettings
from model.runner.fast import FastRunner
from model.runner.loading import MANIFEST, load_model
from model.runner.reference import ReferenceRunner
from ops.bench.engine import long_documents, run
from ops.demo.samples import sample_documents
from ops.train.tiny import train_tokenizer

SEQGPT = dict(vocab_size=250_880, hidden_size=1024, n_layer=24, n_head=16)


# Without a GPU the same script runs a toy shape: a smoke test of the script itself, nothing more.
SMOKE = dict(vocab_size=8000, hidden_size=64, n_layer=2, n_head=4)


def build_seqgpt_shaped(directory: Path, shape: dict[str, int]) -> Path:
    tokenizer = train_tokenizer([raw["text"] for raw, _ in sample_documents(400, seed=1)], vocab_size=8000)
    config = BloomConfig(**shape, bos_token_id=1, eos_token_id=2, pad_token_id=3)
    torch.manual_seed(0)
    BloomForCausalLM(config).to(torch.bfloat16).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    (directory / MANIFEST).write_text('{"recipe": "random-seqgpt-560m-shape"}\n')
    return directory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batches", default="1,8,32,128")
    args = parser.parse_args()
    docs = long_documents(args.docs, seed=0, min_chars=600, max_chars=600)
    with tempfile.TemporaryDirectory() as tmp:
        cuda = torch.cuda.is_available()
        directory = build_seqgpt_shaped(Path(tmp), SEQGPT if cuda else SMOKE)
        settings = EngineSettings(path=str(directory), max_new_tokens=args.new_tokens, prompts_per_forward=256)
        loaded = load_model(settings)
        fast = FastRunner(loaded, settings)
        reference = ReferenceRunner(loaded, settings)
        device = torch.cuda.get_device_name() if cuda else "CPU (smoke test: toy shape, numbers mean nothing)"
        print(f"device {device}, attention backend: {fast.info.attention}, dtype {loaded.dtype}")
        print("| engine | batch | docs/s | ms per document | peak GPU GiB |")
        print("| --- | --- | --- | --- | --- |")
        best = {}
        for name, engine in (("fast", fast), ("reference", reference)):
            for batch in [int(b) for b in args.batches.split(",")]:
                sample = docs[: max(batch * 2, 16)] if name == "reference" else docs
                run(engine, sample[:batch], batch)  # warm-up: compilation, CUDA graphs, allocator
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                seconds = run(engine, sample, batch).seconds
                rate = len(sample) / seconds
                best[name] = max(best.get(name, 0.0), rate)
                peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0
                print(
                    f"| {name} | {batch} | {rate:.1f} | {1000 * seconds / len(sample):.1f} | {peak:.1f} |", flush=True
                )
        print(
            f"best docs/s: fast {best['fast']:.1f}, reference {best['reference']:.1f}, "
            f"ratio {best['fast'] / best['reference']:.1f}x"
        )
        sample = docs[:64]
        outputs = {}
        for batch in (1, 8, 64):
            extractions = run(fast, sample, batch).extractions
            outputs[batch] = [dataclasses.asdict(e) for e in extractions]
        same = sum(outputs[1][i] == outputs[8][i] == outputs[64][i] for i in range(len(sample)))
        print(f"batch invariance: {same}/{len(sample)} documents identical across batch sizes 1, 8 and 64")


if __name__ == "__main__":
    main()
