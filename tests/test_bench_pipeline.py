"""The pipeline benchmark: its arithmetic, and one small run end to end (numbers printed, not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.runner.loading import DEMO_MODEL_DIR
from ops.bench.pipeline import BenchPlan, report_markdown, run_benchmark, stage_table
from ops.bench.runs import RunConfig, RunResult, percentile


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (50.0, 95.0, 99.0)
    assert percentile([3.0, 1.0, 2.0], 100) == 3.0
    assert percentile([3.0, 1.0, 2.0], 0) == 1.0


def test_stage_table_accounts_for_the_whole_latency() -> None:
    result = RunResult(
        config=RunConfig("x", 8, 5.0, None),
        documents=2,
        latencies_s=[1.0, 3.0],
        throughput_per_s=1.0,
        wall_s=2.0,
        mean_batch=2.0,
        stage_ms={"queue": 100.0, "tokenize": 10.0, "prefill": 400.0, "decode": 1200.0, "postprocess": 40.0},
        worker_stage_ms={"prepare_wait": 4.0, "serialise": 5.0, "produce": 45.0},
    )
    rows = stage_table(result)
    assert [r[0] for r in rows][-1] == "before the batcher (topic, fetch)"
    assert rows[-1][1] == pytest.approx(2000 - 1800)
    # The preparation the model waited for is shown, and counted once: as part of tokenize.
    critical = [r for r in rows if r[0] == "prepare on the critical path (per batch)"]
    assert [ms for _, ms, _ in critical] == [4.0]
    rest = [r for r in rows if r not in critical]
    assert sum(ms for _, ms, _ in rest) == pytest.approx(2000)
    assert sum(share for _, _, share in rest) == pytest.approx(1.0)


@pytest.mark.kafka
def test_one_small_run_accounts_for_every_document(kafka_bootstrap, tmp_path) -> None:
    plan = BenchPlan(documents=4, max_new_tokens=4, batch_sizes=(4,), windows_ms=(), hidden_size=64, n_layer=2)
    summary = run_benchmark(plan, tmp_path, kafka_bootstrap, echo=lambda _: None)
    (run,) = summary["runs"]
    assert run["name"] == "batch-4" and run["documents"] == 4 and len(run["latencies_s"]) == 4
    assert all(latency > 0 for latency in run["latencies_s"])
    assert run["p50_s"] <= run["p95_s"] <= run["p99_s"] and run["throughput_per_s"] > 0
    stages = {s["stage"]: s for s in run["stages"]}
    assert stages["decode"]["mean_ms"] > 0 and stages["produce (per batch)"]["mean_ms"] > 0
    assert summary["throughput_ratio"] is None  # no naive run in this plan, so no ratio is claimed
    assert json.loads((tmp_path / "bench_pipeline.json").read_text())["runs"][0]["name"] == "batch-4"
    for path in summary["plots"]:
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| batch-4 | 4 | 5 | burst |" in report_markdown(summary)
    # The engine alone, same documents, same run: the pipeline's share of it is measured, not guessed.
    (alone,) = summary["engine_alone"]
    assert alone["max_documents"] == 4 and alone["engine_per_s"] > 0 and alone["pipeline_share"] > 0
    assert "through Kafka / engine alone" in report_markdown(summary)


@pytest.mark.kafka
def test_a_run_on_the_demo_model_through_the_transactional_worker(kafka_bootstrap, tmp_path) -> None:
    """`--model` and `--delivery`: the shipped model's shape in the summary (read from its directory, not
    the plan's random-model options), every document answered through exactly-once workers."""
    plan = BenchPlan(
        documents=4,
        max_new_tokens=8,
        batch_sizes=(4,),
        windows_ms=(),
        model=str(DEMO_MODEL_DIR),
        delivery="exactly_once",
    )
    summary = run_benchmark(plan, tmp_path, kafka_bootstrap, echo=lambda _: None)
    (run,) = summary["runs"]
    assert run["documents"] == 4 and len(run["latencies_s"]) == 4
    demo = json.loads((DEMO_MODEL_DIR / "config.json").read_text())
    assert (summary["model"]["hidden_size"], summary["model"]["n_layer"]) == (demo["hidden_size"], demo["n_layer"])
    assert summary["model"]["weights"] == str(DEMO_MODEL_DIR) and summary["delivery"] == "exactly_once"
    assert f"weights, hidden {demo['hidden_size']} x {demo['n_layer']} layers" in report_markdown(summary)
