"""The pipeline benchmark's pictures: latency CDFs, and throughput and P95 against the batching knobs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on the machines that run this

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter

from ops.bench.runs import RunResult


def write_plots(results: list[RunResult], out_dir: Path) -> list[Path]:
    paths = [_latency_cdf(results, out_dir / "bench_latency_cdf.png")]
    burst = sorted((r for r in results if r.config.rate_per_s is None), key=lambda r: r.config.max_documents)
    paced = sorted((r for r in results if r.config.rate_per_s is not None), key=lambda r: r.config.window_ms)
    if burst:
        paths.append(
            _knob(
                burst,
                [r.config.max_documents for r in burst],
                "max documents per batch (burst arrival)",
                out_dir / "bench_batch_size.png",
                log_x=True,
            )
        )
    if paced:
        rate = paced[0].config.arrival
        paths.append(
            _knob(
                paced,
                [r.config.window_ms for r in paced],
                f"batching window, ms (arrivals at {rate})",
                out_dir / "bench_batch_window.png",
                log_x=True,
            )
        )
    return paths


def _latency_cdf(results: list[RunResult], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=100)
    for r in results:
        values = sorted(r.latencies_s)
        shares = [(i + 1) / len(values) for i in range(len(values))]
        label = f"{r.config.name} ({r.config.arrival})"
        ax.step(values, shares, where="post", label=label, linewidth=2 if r.config.max_documents == 1 else 1.2)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("end-to-end latency, s (submitted_at to output written)")
    ax.set_ylabel("share of documents")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Latency CDF", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _knob(results: list[RunResult], xs: list[float], xlabel: str, path: Path, log_x: bool) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4), dpi=100)
    ax.set_title("Throughput (o, left) and P95 latency (s, right)", fontsize=10)
    ax.plot(xs, [r.throughput_per_s for r in results], "o-", color="tab:blue")
    ax.set_ylabel("throughput, documents/s", color="tab:blue")
    ax.set_xlabel(xlabel)
    if log_x:
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.xaxis.set_minor_formatter(NullFormatter())
    other = ax.twinx()
    other.plot(xs, [r.percentile(95) for r in results], "s--", color="tab:red")
    other.set_ylabel("P95 end-to-end latency, s", color="tab:red")
    # From zero: a paced run's throughput is its arrival rate, and noise must not look like a trend.
    ax.set_ylim(bottom=0)
    other.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
