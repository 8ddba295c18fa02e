"""`seqstream-ops ...`: the tooling around the product: the demo, generated corpora, the accuracy table,
benchmarks and the soak, demo-model training.

It imports the product (`streams`, `model`, `schemas`); the product never imports it. Its extra
dependencies (faker, matplotlib) come with `pip install 'seqstream[tools]'`; a worker needs none of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from streams.cli.main import configure, engine_for, settings_options

# Third-party packages only the tooling uses: the `tools` extra in pyproject.toml.
TOOLS_EXTRA = ("faker", "matplotlib")

train_dir_option = click.option(
    "--train-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoints and snapshots of `demo-model build` (default: ~/.cache/seqstream/demo-train).",
)


@click.group()
@settings_options
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None, model_path: str | None) -> None:
    """SeqStream's tooling: demo, corpora, accuracy, benchmarks, demo model."""
    ctx.obj = configure(bootstrap, model_path)


@cli.group()
def bench() -> None:
    """Measurements on a real broker and worker processes (each prints what it measured)."""


@bench.command("soak")
@click.option("--minutes", type=float, default=10.0, show_default=True, help="How long to publish at --rate.")
@click.option("--burst", type=int, default=2000, show_default=True, help="Documents published at once first.")
@click.option("--rate", type=float, default=20.0, show_default=True, help="Documents per second after the burst.")
@click.option("--text-chars", type=int, default=2000, show_default=True, help="Characters of text per document.")
@click.option("--sample-s", type=float, default=10.0, show_default=True, help="Seconds between samples.")
@click.option("--drain-timeout", type=float, default=600.0, show_default=True, help="Seconds allowed to drain.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("var/soak/worker.log"))
@click.pass_context
def bench_soak(
    ctx: click.Context,
    minutes: float,
    burst: int,
    rate: float,
    text_chars: int,
    sample_s: float,
    drain_timeout: float,
    log_path: Path,
) -> None:
    """Flood a worker of its own: throughput, lag and RSS over time, then every document accounted for."""
    from ops.stress.soak import run_soak

    result = run_soak(
        ctx.obj,
        minutes=minutes,
        burst=burst,
        rate=rate,
        text_chars=text_chars,
        sample_s=sample_s,
        drain_timeout_s=drain_timeout,
        log_path=log_path,
        echo=click.echo,
    )
    if result.lost or not result.worker_alive:
        raise click.ClickException(f"{result.lost} documents not answered; worker alive: {result.worker_alive}")


@cli.command()
@click.option("--documents", type=int, default=20, help="How many sample documents to publish.")
@click.option("--keep-running", is_flag=True, help="Leave broker and worker running after showing results.")
@click.pass_context
def demo(ctx: click.Context, documents: int, keep_running: bool) -> None:
    """Start everything on this machine (broker, topics, worker), publish samples, show the results."""
    from ops.demo.run import run_demo

    run_demo(ctx.obj, documents=documents, keep_running=keep_running)


@bench.command("pipeline")
@click.option("--documents", type=int, default=64, show_default=True, help="Corpus size per run.")
@click.option(
    "--max-new-tokens",
    type=int,
    default=None,
    help="Per prompt [default: 32 for the random model, the product's own with --model].",
)
@click.option("--batch-sizes", default="1,4,16,32", show_default=True, help="Burst runs; 1 is the naive design.")
@click.option("--windows-ms", default="5,50,200", show_default=True, help="Paced runs at --window-batch.")
@click.option("--window-batch", type=int, default=32, show_default=True)
@click.option("--rate", type=float, default=None, help="Paced arrival rate, docs/s (default: half the burst rate).")
@click.option("--hidden-size", type=int, default=256, show_default=True, help="Of the random BLOOM model built.")
@click.option("--layers", type=int, default=4, show_default=True)
@click.option(
    "--engine",
    type=click.Choice(["reference", "fast"]),
    default="reference",
    show_default=True,
    help="For every run; reference is transformers' generate(), what the naive design calls.",
)
@click.option(
    "--model",
    "model_dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="A trained model directory (model/demo) in place of the random BLOOM: answers that end.",
)
@click.option(
    "--delivery",
    type=click.Choice(["at_least_once", "exactly_once"]),
    default="at_least_once",
    show_default=True,
    help="The workers' delivery mode: the Faust agent, or the transactional worker.",
)
@click.option(
    "--prepare-processes",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Processes preparing each batch's documents beside the worker's own (model/prepare_pool.py).",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("ops/bench/results"))
@click.pass_context
def bench_pipeline(
    ctx: click.Context,
    documents: int,
    max_new_tokens: int | None,
    batch_sizes: str,
    windows_ms: str,
    window_batch: int,
    rate: float | None,
    hidden_size: int,
    layers: int,
    engine: str,
    model_dir: str | None,
    delivery: str,
    prepare_processes: int,
    out_dir: Path,
) -> None:
    """Throughput, latency percentiles and stage breakdown; micro-batched beside naive; PNG plots."""
    import os

    from model import EngineSettings
    from ops.bench.pipeline import BenchPlan, report_markdown, run_benchmark

    if max_new_tokens is None:
        # A random model's answers run to any limit; a trained one's end, and a short limit would cut them.
        max_new_tokens = 32 if model_dir is None else EngineSettings().max_new_tokens

    plan = BenchPlan(
        documents=documents,
        max_new_tokens=max_new_tokens,
        batch_sizes=tuple(int(x) for x in batch_sizes.split(",") if x),
        windows_ms=tuple(float(x) for x in windows_ms.split(",") if x),
        window_batch=window_batch,
        rate_per_s=rate,
        hidden_size=hidden_size,
        n_layer=layers,
        engine=engine,
        model=model_dir,
        delivery=delivery,
        prepare_processes=prepare_processes,
    )
    # A broker named anywhere (option or environment) is used; otherwise the benchmark starts its own.
    configured = ctx.find_root().params.get("bootstrap") or "SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS" in os.environ
    bootstrap = ctx.obj.kafka.bootstrap_servers if configured else None
    summary = run_benchmark(plan, out_dir, bootstrap, echo=click.echo)
    click.echo(report_markdown(summary))
    for path in summary["plots"]:
        click.echo(f"wrote {path}")


@cli.group()
def corpus() -> None:
    """Generated documents with ground truth."""


@corpus.command("generate")
@click.option("--count", type=int, default=100, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--noise", type=float, default=0.0, show_default=True, help="OCR-style noise per character.")
@click.option("--long", "long_documents", is_flag=True, help="3,000-30,000 characters: contracts, news, medical.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def corpus_generate(count: int, seed: int, noise: float, long_documents: bool, output: Path) -> None:
    """Write FILE.jsonl (raw documents) and FILE.truth.jsonl (their ground truth)."""
    from ops.corpus.generate import generate_corpus, truth_path, write_corpus

    written = write_corpus(output, generate_corpus(count, seed, noise, long=long_documents))
    click.echo(f"wrote {written} documents to {output} and their ground truth to {truth_path(output)}")


@corpus.command("from-reviews")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--idle-timeout", type=float, default=5.0, show_default=True, help="Seconds without a new message.")
@click.pass_context
def corpus_from_reviews(ctx: click.Context, output: Path, idle_timeout: float) -> None:
    """The review desk's accepted and corrected decisions as FILE.jsonl and FILE.truth.jsonl: a corpus
    to score on (`eval FILE`) and to fine-tune on (`demo-model build --corpus FILE`, or SeqGPT's own)."""
    from ops.corpus.from_reviews import reviewed_documents, write_reviewed
    from ops.corpus.generate import truth_path

    written = write_reviewed(output, reviewed_documents(ctx.obj, idle_timeout))
    click.echo(f"wrote {written} reviewed documents to {output} and their values to {truth_path(output)}")


@cli.command("eval")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A corpus (or FILES).")
@click.option("--model", "model_path", help="Model directory or hub id (overrides the global --model).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the tables.")
@click.option(
    "--systems",
    "names",
    default=None,
    help="Comma-separated columns to run (default all): product, head only, unconstrained, regex baseline,"
    " lexicon NER, LAC script, product else LAC.",
)
@click.pass_context
def eval_accuracy(
    ctx: click.Context,
    files: tuple[Path, ...],
    data: Path | None,
    model_path: str | None,
    json_out: Path | None,
    names: str | None,
) -> None:
    """Score the engine and its peers on corpora (FILE.jsonl and its FILE.truth.jsonl); without FILES,
    on every hand-written corpus in ops/corpus. Each corpus's table, then the peers' summary."""
    import msgspec

    from ops.eval.peers import hand_written_corpora
    from ops.eval.table import as_json, compare, format_summary, format_table, systems

    corpora = [*files, *([data] if data else [])] or hand_written_corpora()
    settings = ctx.obj
    model = msgspec.structs.replace(settings.model, path=model_path) if model_path else settings.model
    wanted = [n.strip() for n in names.split(",")] if names else None
    engines = systems(
        model, lambda engine_settings: engine_for(msgspec.structs.replace(settings, model=engine_settings)), wanted
    )
    reports = {}
    for corpus in corpora:
        reports[corpus] = compare(engines, corpus, settings.batch.max_documents)
        click.echo(f"== {corpus}")
        click.echo(format_table(reports[corpus]))
        click.echo("")
    click.echo(format_summary({str(c): r for c, r in reports.items()}))
    if json_out:
        tables = [as_json(r, c) for c, r in reports.items()]
        json_out.write_text(json.dumps(tables[0] if len(tables) == 1 else tables, indent=2, ensure_ascii=False) + "\n")


@cli.group("demo-model")
def demo_model() -> None:
    """Train and export the shipped demo model (model/demo/)."""


@demo_model.command("build")
@train_dir_option
@click.option("--stop-after", type=float, default=None, help="Seconds to train in this run; rerun to resume.")
@click.option("--steps", type=int, default=None, help="Train to this step (default: the plan's).")
@click.option("--device", default="cpu", show_default=True, help="Where to train: cpu, cuda, cuda:1 ...")
@click.option("--threads", type=int, default=None, help="Torch CPU threads (default: torch's own choice).")
@click.option("--workers", type=int, default=0, show_default=True, help="Processes making batches ahead.")
@click.option("--batch-tokens", type=int, default=None, help="Tokens per step (default: the plan's, 2048).")
@click.option("--hidden", type=int, default=None, help="Hidden size (default: the plan's, 128).")
@click.option("--layers", type=int, default=None, help="Transformer layers (default: the plan's, 4).")
@click.option("--heads", type=int, default=None, help="Attention heads (default: the plan's, 4).")
@click.option("--lr", type=float, default=None, help="Peak learning rate (default: the plan's, 2e-3).")
@click.option("--warmup", type=int, default=None, help="Warm-up steps (default: the plan's, 200).")
@click.option(
    "--init-from",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Fine-tune: start from this model directory's tokenizer and weights (model/demo), no curriculum.",
)
@click.option(
    "--mix",
    default="",
    help="Shares of the data mix, e.g. open=0.25,free=0.3,fragment=0.2 (default: ops.train.demo_data.DataMix's).",
)
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A labelled corpus mixed into training (e.g. `corpus from-reviews` output): --mix reviewed= sets its share.",
)
def demo_model_build(
    train_dir: Path | None,
    stop_after: float | None,
    steps: int | None,
    device: str,
    threads: int | None,
    workers: int,
    batch_tokens: int | None,
    hidden: int | None,
    layers: int | None,
    heads: int | None,
    lr: float | None,
    warmup: int | None,
    init_from: Path | None,
    mix: str,
    corpus: Path | None,
) -> None:
    """Train the demo model from its seed, resuming from the last checkpoint if there is one.

    --steps beyond the plan's end continues a finished run with a new cosine to that step (recorded
    in the manifest's `schedule`). A resumed run must keep the size options it started with."""
    from dataclasses import replace

    import torch

    from ops.train.demo_data import DataMix
    from ops.train.demo_model import DEMO_PLAN, TRAIN_DIR, build

    if threads:
        torch.set_num_threads(threads)
    sizes = {"steps": steps, "hidden_size": hidden, "n_layer": layers, "n_head": heads, "lr": lr}
    sizes["warmup_steps"] = warmup
    recipe = replace(DEMO_PLAN.recipe, **{k: v for k, v in sizes.items() if v is not None})
    shares = {name: float(share) for name, _, share in (part.partition("=") for part in mix.split(",") if part)}
    plan = replace(DEMO_PLAN, recipe=recipe, batch_tokens=batch_tokens or DEMO_PLAN.batch_tokens, mix=DataMix(**shares))
    if init_from is not None:
        # A trained model reads full documents already: the short-to-long curriculum is for a fresh one.
        plan = replace(plan, curriculum_steps=1)
    snapshot = build(
        plan,
        train_dir or TRAIN_DIR,
        log=click.echo,
        stop_after_s=stop_after,
        device=device,
        workers=workers,
        init_from=init_from,
        corpus=corpus,
    )
    click.echo(f"snapshot: {snapshot}; `seqstream-ops demo-model export` evaluates and ships the best")


@demo_model.command("export")
@train_dir_option
@click.option("--documents", type=int, default=1000, show_default=True, help="Held-out documents to evaluate on.")
@click.option("--candidates", type=int, default=2, show_default=True, help="How many of the last snapshots to try.")
@click.option(
    "--to", "destination", type=click.Path(file_okay=False, path_type=Path), default=None, help="Default: model/demo/."
)
def demo_model_export(train_dir: Path | None, documents: int, candidates: int, destination: Path | None) -> None:
    """Evaluate the latest snapshots on a held-out corpus and ship the best to model/demo/ (or --to),
    with the tables of the hand-written corpora (freeform, layouts and mixed, in ops/corpus/) beside it."""
    from ops.train.demo_model import DEMO_DIR, TRAIN_DIR, export_best

    shipped, table = export_best(
        train_dir or TRAIN_DIR, documents, candidates, log=click.echo, destination=destination or DEMO_DIR
    )
    click.echo(table)
    click.echo(f"exported to {shipped}")


def main() -> None:
    try:
        cli(prog_name="seqstream-ops")
    except ModuleNotFoundError as exc:
        if exc.name not in TOOLS_EXTRA:
            raise
        raise SystemExit(f"seqstream-ops needs {exc.name}: pip install 'seqstream[tools]'") from None


if __name__ == "__main__":
    main()
