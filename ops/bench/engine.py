"""Engine benchmark: the engines on the same documents and batches, in one run, and where their
time goes. Per engine: docs/s; per decode step the model's own time and the host's around it (mask,
signals, advancing the grammar, bookkeeping); per document the time outside the steps (tokenising,
preparing the grammars, postprocess); and whether the outputs are identical.

    python -m ops.bench.engine [--shape overhead|small] [--vocab 250880] [--docs 64 --batch 64] [--rounds 3]
        [--prepare-processes N] [--json F]

`--shape overhead` is a compute-free BLOOM (hidden 16, one layer, one head): what remains of a step
is host work, which is what keeps a GPU idle. The model has random weights; its tokenizer is trained
on the sample documents (4,000 entries), or, with a larger `--vocab`, is a byte-level BPE of that
size (ops/train/standin_tokenizer.py, a stand-in for SeqGPT's 250,880). Beside the product's defaults run
the other of the two array grammars (the device grammar on a CPU, the host grammar on an accelerator),
the grammar as it was (ops/oracle: a Python state machine per row and step), no grammar,
transformers' generate(), and the product with processes preparing each batch's documents beside its
own (`--prepare-processes`, by default one fewer than the cores, at most 8; model/prepare_pool.py).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec
import torch

from model.answers.parse import read_extraction
from model.answers.prompt import encode_prompts
from model.answers.tagger import tag_run
from model.answers.validate import Extraction
from model.answers.words import words_of
from model.build import settle_heap
from model.clock import ms_since, sum_timings
from model.config import EngineSettings
from model.engine import Extractor, PrepareFunction, document_grammars, prepare
from model.grammar.constrainer import Constrainer
from model.prepare_pool import PreparePool
from model.runner.fast import LENGTH_BUCKET, FastRunner, bucket
from model.runner.loading import load_model
from model.runner.protocol import Passes
from model.runner.reference import ReferenceRunner
from model.values.entities import _lac_entities
from model.values.mentions import mentions
from model.values.normalize import normal_form
from ops.demo.samples import sample_documents
from ops.oracle import OracleConstrainer
from ops.train.tiny import build_tiny_bloom
from schemas.decode import decode_document
from schemas.messages import Document, Timings

STAGES = ("tokenize_ms", "prefill_ms", "decode_ms", "constrain_ms", "postprocess_ms")


def long_documents(
    count: int, seed: int, min_chars: int = 300, max_chars: int = 1000, labels: tuple[int, int] = (6, 12)
) -> list[Document]:
    """Sample texts strung together to 300-1000 characters, asking for 6-12 labels each (by default)."""
    rng = random.Random(seed)
    pool = [raw for raw, _ in sample_documents(count * 12, seed=seed)]
    names = sorted({label for raw in pool for label in _field_set_labels(raw["field_set"])})
    docs = []
    for i in range(count):
        target = rng.randint(min_chars, max_chars)
        text = ""
        while len(text) < target:
            text += rng.choice(pool)["text"]
        raw = {"doc_id": f"bench-{i}", "text": text[:target], "labels": rng.sample(names, rng.randint(*labels))}
        docs.append(decode_document(msgspec.json.encode(raw), 1 << 20))
    return docs


def _field_set_labels(name: str) -> tuple[str, ...]:
    from schemas.field_sets import FIELD_SETS

    return FIELD_SETS[name]


class Timed(Protocol):
    seconds: float


TimedRun = TypeVar("TimedRun", bound=Timed)


@dataclass
class Run:
    extractions: list[Extraction]
    timings: Timings
    tokens: int
    seconds: float
    steps: int  # decode steps, each one forward pass of the whole batch
    passes: Passes


# The product's caches keyed by a document's text or a value of it. A worker sees each document once,
# so each engine's timed run starts with them empty, its grammar builder's source tables too:
# otherwise the first engine pays every text's word segmentation and the engines after it get it
# free (the product's figure read 0.65x of the device grammar's for that alone). The tagger's memo of
# unknown runs (`tag_run`) is no text's, and a worker keeps it warm, but it is cleared too: a run
# then gains only from runs repeated within it.
PER_TEXT_CACHES = (words_of, tag_run, mentions, _lac_entities, read_extraction, normal_form)


def forget_texts(keep: tuple[object, ...] = ()) -> None:
    """Empty the per-text caches, all but those in `keep`."""
    for cached in PER_TEXT_CACHES:
        if all(cached is not kept for kept in keep):
            cached.cache_clear()


def run(
    runner: FastRunner | ReferenceRunner, docs: list[Document], batch: int, prepare_with: PrepareFunction = prepare
) -> Run:
    forget_texts()
    runner.constrainer.forget_documents()
    extractions, timings, tokens, steps, passes = [], [], 0, 0, Passes()
    engine = Extractor(runner, prepare_with)
    started = time.perf_counter()
    for start in range(0, len(docs), batch):
        result = engine.extract(docs[start : start + batch])
        extractions += result.extractions
        tokens += result.generated_tokens
        timings.append(result.timings)
        passes += result.passes
        # One group per batch here (prompts_per_forward covers it): its steps are its longest row's.
        steps += max(len(t.generation.token_ids) for e in result.extractions for t in e.traces)
    return Run(extractions, sum_timings(timings), tokens, time.perf_counter() - started, steps, passes)


def median_run(runs: list[TimedRun]) -> TimedRun:
    """The run of median wall time (the lower middle of an even count): its own timings, not a blend."""
    return sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]


def model_ms_per_step(
    engine: FastRunner, rows: int, context: int, steps: int = 30, heads_first: bool | None = None
) -> float:
    """The model's own time for one decode step of `rows` rows over about `context` cached positions:
    the same compiled or eager step the engine takes, timed bare (no mask, signals or bookkeeping).
    `heads_first` given: in fresh caches of that memory layout (model/runner/kv_cache.py), not the engine's."""
    length = bucket(context + engine.settings.max_new_tokens + 1, LENGTH_BUCKET)
    if heads_first is None:
        engine.model.caches = engine.caches("rows", rows, length)
    else:
        engine.model.caches = engine.model.new_caches(rows, length, heads_first=heads_first)
    token = torch.zeros(rows, dtype=torch.long, device=engine.device)
    pos = torch.full((rows,), context, dtype=torch.long, device=engine.device)
    with torch.inference_mode():
        # CUDA graphs record a new shape on its first calls, not its first one alone.
        for _ in range(3):
            engine.decode_step(engine.model, token, pos)
        engine._sync()
        started = time.perf_counter()
        for i in range(steps):
            engine.decode_step(engine.model, token, pos + i)
        engine._sync()
    return ms_since(started) / steps


def preparation_ms(engine: FastRunner | ReferenceRunner, docs: list[Document]) -> tuple[float, float]:
    """Per document: tokenising its prompts, and preparing their grammars, both from cold (an engine
    keeps the tables of the documents it has just decoded, and the timed run left each text's word
    segmentation in `words_of`'s cache: read warm, this column left out jieba, most of the work)."""
    forget_texts()
    warm = engine.constrainer
    # The constrainer's device, not the engine's: the reference engine (transformers' generate())
    # keeps its device on its loaded model and has no `device` of its own.
    if isinstance(warm, OracleConstrainer):
        cold = OracleConstrainer(warm.vocab, engine.eos_id, warm.device)
    else:
        cold = Constrainer(warm.tokens, engine.eos_id, warm.device, warm.vocab)
    tokenize = prepare = 0.0
    for doc in docs:
        started = time.perf_counter()
        encoded = encode_prompts(
            engine.tokenizer, doc, engine.settings.labels_per_prompt, engine.settings.max_input_tokens
        )
        tokenize += ms_since(started)
        started = time.perf_counter()
        document_grammars(cold, doc, encoded.text, encoded.chunks, engine.settings.constrained)
        prepare += ms_since(started)
    return tokenize / len(docs), prepare / len(docs)


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


SHAPES = {
    # A random BLOOM small enough to run on a CPU, with SeqGPT's structure.
    "small": {"hidden": 256, "layers": 4, "heads": 8},
    # Compute-free: what is left of a decode step is the host's work around the model.
    "overhead": {"hidden": 16, "layers": 1, "heads": 1},
}


@dataclass
class Figures:
    """One engine's run, as printed and as written by --json."""

    engine: str
    docs_per_s: float
    host_ms_per_step: float | None
    model_ms_per_step: float | None
    host_ms_per_doc: float
    tokenize_ms_per_doc: float
    prepare_ms_per_doc: float
    postprocess_ms_per_doc: float
    # The timed run's preparation (tokenising and grammars) per document, as its wall clock saw it:
    # with preparing processes, the engine's process waits only for the slowest share.
    prepare_wall_ms_per_doc: float
    mask_ms_per_step: float | None
    decode_steps: int
    seconds: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs per engine, in turn; the median is shown")
    parser.add_argument("--no-reference", action="store_true", help="skip transformers' generate() (slow)")
    parser.add_argument(
        "--prepare-processes",
        type=int,
        default=max(1, min(8, (os.cpu_count() or 2) - 1)),
        help="preparing processes of the pooled row (model/prepare_pool.py); 0 leaves the row out",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    shape = {k: getattr(args, k) or v for k, v in SHAPES[args.shape].items()}

    torch.manual_seed(args.seed)
    docs = long_documents(args.docs, args.seed)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as closing:
        texts = [raw["text"] for raw, _ in sample_documents(300, seed=1)]
        directory = build_model(Path(tmp), texts, shape, args.vocab)
        settings = EngineSettings(path=str(directory), max_new_tokens=args.new_tokens, prompts_per_forward=64)
        loaded = load_model(settings)
        product = FastRunner(loaded, settings)
        engines: dict[str, FastRunner | ReferenceRunner] = {
            DEFAULT: product,
            "fast, old mask (ops/oracle)": FastRunner(loaded, settings),
            "fast, unconstrained": FastRunner(loaded, msgspec.structs.replace(settings, constrained=False)),
        }
        # The device grammar on a CPU too (the product steps it only on an accelerator), and the host
        # grammar on an accelerator too: the other one of the two, beside the product's choice.
        # The product with documents prepared in processes beside its own: a pool kept for the run,
        # whose processes drop each text's tables once handed over (per-text caches cold, as here).
        prepare_with: dict[str, PrepareFunction] = {}
        if args.prepare_processes:
            pooled = FastRunner(loaded, settings)
            engines[pooled_name(args.prepare_processes)] = pooled
            pool = closing.enter_context(PreparePool(settings, pooled.tokenizer, args.prepare_processes))
            prepare_with[pooled_name(args.prepare_processes)] = pool.prepare
        other_grammar = FastRunner(loaded, settings)
        other_grammar.constrainer.grammar_on_device = product.device.type == "cpu"
        engines[OTHER_GRAMMAR[other_grammar.constrainer.grammar_on_device]] = other_grammar
        old = engines["fast, old mask (ops/oracle)"]
        old.constrainer = OracleConstrainer(old.constrainer.tokens, old.eos_id, old.device)
        if not args.no_reference:
            engines["reference"] = ReferenceRunner(loaded, settings)
        # A throwaway engine of the product's settings reads every document first: what a process pays
        # once (allocator pages for a full batch, the word tagger's per-character tables) then falls on no
        # timed engine, the first timed of which paid it before, while each one's per-text tables stay cold.
        run(FastRunner(loaded, settings), docs, args.batch)
        # Warm-up, so first-call costs (allocation, kernel selection, compiling) are not measured: a
        # compiled step compiles once per (batch, length) bucket, so it sees every batch first.
        for name, engine in engines.items():
            if isinstance(engine, FastRunner) and engine.compiled:
                run(engine, docs, args.batch, prepare_with.get(name, prepare))
            else:
                Extractor(engine, prepare_with.get(name, prepare)).extract(docs[: min(2, len(docs))])
        settle_heap()  # as the worker does once its engine is built: no full collection walks the loaded heap
        # Rounds in turn, each engine's median kept: one run of a second or so swings by a third on a
        # 2-core machine (the unconstrained row read 79 and 116 docs/s for the same code), and in turn
        # a slow spell falls on every engine alike.
        rounds: dict[str, list[Run]] = {name: [] for name in engines}
        for _ in range(args.rounds):
            for name, engine in engines.items():
                rounds[name].append(run(engine, docs, args.batch, prepare_with.get(name, prepare)))
        results = {name: median_run(runs) for name, runs in rounds.items()}
        prompts = [p for prepared in prepare(engines[DEFAULT], docs) for p in prepared.encoded.prompts]
        context = sum(len(p) for p in prompts) // len(prompts)
        figures = [
            figures_of(name, engine, results[name], docs, min(64, args.batch * 2), context)
            for name, engine in engines.items()
        ]

    command = f"python -m ops.bench.engine {' '.join(_argv(args))}"
    print(f"command: {command}")
    print(
        f"model: random BLOOM hidden {shape['hidden']} x {shape['layers']} layers, {shape['heads']} heads, "
        f"vocab {loaded.model.config.vocab_size:,} (tokenizer {len(loaded.tokenizer):,}); {len(docs)} documents of "
        f"300-1000 characters, 6-12 labels, batch {args.batch}, {args.new_tokens} new tokens per prompt, "
        f"fp32 on {loaded.device}, {torch.get_num_threads()} threads, attention {engines[DEFAULT].info.attention}; "
        f"each engine's median of {args.rounds} timed rounds, taken in turn"
    )
    print(
        "\nHost time per step = decode time / decode passes - the model's own time per step (the same decode step"
        "\ntimed bare, same batch and cache length). Host time per document = tokenising and preparing the grammars"
        "\n(from cold, in one process) + postprocess. Prepare wall = the timed run's tokenising and grammars per"
        "\ndocument by the clock (the engine's process waiting for its preparing processes' shares, where it has them)."
    )
    print(
        "\n| engine | docs/s | host ms/step | model ms/step | mask ms/step | decode passes | host ms/doc "
        "| tokenize | grammar prep | postprocess | prepare wall |\n|" + " --- |" * 11
    )
    for f in figures:
        print(
            f"| {f.engine} | {f.docs_per_s:.2f} | {_ms(f.host_ms_per_step)} | {_ms(f.model_ms_per_step)} "
            f"| {_ms(f.mask_ms_per_step)} | {f.decode_steps} | {f.host_ms_per_doc:.2f} | {f.tokenize_ms_per_doc:.2f} "
            f"| {f.prepare_ms_per_doc:.2f} | {f.postprocess_ms_per_doc:.2f} | {f.prepare_wall_ms_per_doc:.2f} |"
        )
    by_name = {f.engine: f for f in figures}
    old_name = "fast, old mask (ops/oracle)"
    print(f"\ndocs/s, {DEFAULT} / {old_name}: {by_name[DEFAULT].docs_per_s / by_name[old_name].docs_per_s:.2f}x")
    base_name = "reference" if "reference" in results else old_name
    base = results[base_name].extractions
    for name in results:
        if name == base_name:
            continue
        pairs = list(zip(base, results[name].extractions, strict=True))
        tokens = sum(_tokens(a) == _tokens(b) for a, b in pairs)
        records = sum(comparable(a) == comparable(b) for a, b in pairs)
        print(
            f"identical, {name} / {base_name}: tokens {tokens}/{len(docs)} documents, "
            f"records less float signals {records}/{len(docs)}"
        )
    for name, runs in rounds.items():
        same = sum(_all_tokens(r) == _all_tokens(runs[0]) for r in runs)
        print(f"repeatable, {name}: tokens of every document as in its first round in {same}/{len(runs)} rounds")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"command": command, "default": DEFAULT, "runs": [dataclasses.asdict(f) for f in figures]}, indent=2
            )
        )


DEFAULT = "fast (product defaults)"


def pooled_name(processes: int) -> str:
    return f"fast, {processes} preparing process{'es' if processes > 1 else ''}"


OTHER_GRAMMAR = {True: "fast, device grammar", False: "fast, host grammar"}


def _tokens(extraction: Extraction) -> list[list[int]]:
    return [t.generation.token_ids for t in extraction.traces]


def _all_tokens(run: Run) -> list[list[list[int]]]:
    return [_tokens(e) for e in run.extractions]


def figures_of(name: str, engine, result: Run, docs: list[Document], rows: int, context: int) -> Figures:
    n = len(docs)
    t = result.timings
    fast = isinstance(engine, FastRunner)
    tokenize, prepare = preparation_ms(engine, docs)
    model = model_ms_per_step(engine, rows, context) if fast else None
    steps = result.passes.decode if fast else result.steps
    per_step = (t.decode_ms / steps) if steps else None
    return Figures(
        engine=name,
        docs_per_s=n / result.seconds,
        host_ms_per_step=per_step - model if fast and per_step is not None else None,
        model_ms_per_step=model,
        host_ms_per_doc=tokenize + prepare + t.postprocess_ms / n,
        tokenize_ms_per_doc=tokenize,
        prepare_ms_per_doc=prepare,
        postprocess_ms_per_doc=t.postprocess_ms / n,
        prepare_wall_ms_per_doc=t.tokenize_ms / n,
        mask_ms_per_step=t.constrain_ms / steps if steps else None,
        decode_steps=steps,
        seconds=result.seconds,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def build_model(directory: Path, texts: list[str], shape: dict[str, int], vocab: int) -> Path:
    """A random BLOOM of `shape`; its tokenizer trained on `texts` (4,000 entries), or for a larger
    vocabulary a byte-level BPE of that size (ops/train/standin_tokenizer.py), so that the grammar's
    tables, and not only the LM head, have SeqGPT's size."""
    if vocab > 4000:
        from ops.train.standin_tokenizer import save_standin_model

        return save_standin_model(
            directory, texts, vocab, hidden_size=shape["hidden"], n_layer=shape["layers"], n_head=shape["heads"]
        )
    return build_tiny_bloom(
        directory,
        texts,
        hidden_size=shape["hidden"],
        n_layer=shape["layers"],
        n_head=shape["heads"],
        vocab_size=vocab,
        # BLOOM's default init gives near-uniform logits, where 1e-6 of rounding flips near-ties.
        initializer_range=0.3,
    )


def _argv(args: argparse.Namespace) -> list[str]:
    """The options as typed, so the printed command runs again: flags bare, options left unset omitted."""
    options = {f"--{k.replace('_', '-')}": v for k, v in vars(args).items() if v is not None and v is not False}
    return [name if value is True else f"{name} {value}" for name, value in options.items()]


if __name__ == "__main__":
    main()
