"""The engine benchmark runs as documented, transformers' generate() included (it once crashed on
the reference engine, which has no `device`), and says the engines agree token for token."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
def test_the_overhead_benchmark_runs_with_the_reference_engine() -> None:
    command = [sys.executable, "-m", "ops.bench.engine", "--shape", "overhead", "--docs", "2", "--batch", "2"]
    command += ["--new-tokens", "8", "--prepare-processes", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "| reference |" in out
    assert "identical, fast (product defaults) / reference: tokens 2/2 documents" in out
    # On a CPU the product steps the host grammar; the device grammar runs beside it, to the same tokens.
    assert "identical, fast, device grammar / reference: tokens 2/2 documents" in out
    # Documents prepared in a process beside the engine's decode to the same tokens.
    assert "identical, fast, 1 preparing process / reference: tokens 2/2 documents" in out
    # The printed command is the one that ran, runnable as printed.
    assert "command: python -m ops.bench.engine --shape overhead --vocab 4000 --docs 2 --batch 2 --new-tokens 8" in out
    # Every engine's timed rounds decode every document to the same tokens.
    assert out.count("tokens of every document as in its first round in 3/3 rounds") == 6
    assert "None" not in out.split("\n")[0] and "False" not in out.split("\n")[0]


@pytest.mark.timeout(300)
def test_the_kv_layout_benchmark_times_both_layouts_per_model_and_rows() -> None:
    command = [sys.executable, "-m", "ops.bench.kv_layout", "--layers", "1,2", "--rows", "8", "--steps", "2"]
    command += ["--rounds", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("1", "8"), ("2", "8")]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows)
    assert "command: python -m ops.bench.kv_layout --hidden 64 --heads 4 --layers 1,2 --rows 8" in done.stdout


@pytest.mark.timeout(300)
def test_the_mentions_benchmark_times_both_patterns_and_finds_the_same_mentions() -> None:
    command = [sys.executable, "-m", "ops.bench.mentions", "--docs", "4", "--rounds", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [
        line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ") and "ms/doc" not in line
    ]
    rows = [[cell.strip() for cell in r] for r in rows if not r[0].strip().startswith("---")]
    assert [(r[0], r[1]) for r in rows] == [
        ("engine bench (4 documents)", "date"),
        ("engine bench (4 documents)", "amount"),
        ("hand-written corpora", "date"),
        ("hand-written corpora", "amount"),
    ]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 and r[4] == "yes" for r in rows)
    assert "command: python -m ops.bench.mentions --docs 4 --rounds 1" in done.stdout


@pytest.mark.timeout(300)
def test_the_hand_written_benchmark_times_each_stage_of_the_trained_path() -> None:
    corpus = REPO / "ops" / "corpus" / "layouts.jsonl"
    command = [sys.executable, "-m", "ops.bench.handwritten", "--batch", "8", "--rounds", "1", str(corpus)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| layouts")]
    [stages, backoff] = [[cell.strip() for cell in r] for r in rows]
    assert stages[1] == "40"
    docs_per_s, prefill, decode, backed_off, lac, scoring = (float(stages[i]) for i in (2, 4, 5, 7, 8, 9))
    # The model read every document, and the lexicon backed off on this corpus (it does on nearly all).
    assert docs_per_s > 0 and prefill > 0 and decode > 0 and lac > 0 and scoring > 0, stages
    assert backed_off == pytest.approx(lac + scoring, abs=0.11)
    read, of = backoff[1].split(" (")[0].split(" of ")
    assert of == "40" and 0 < int(read) <= 40 and int(backoff[2]) > 0, backoff
    assert f"command: python -m ops.bench.handwritten --batch 8 --rounds 1 {corpus}" in done.stdout
