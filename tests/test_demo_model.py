"""The demo model: its build resumes exactly, its export ships the best snapshot with its numbers,
and the shipped model/demo/ stands in for SeqGPT, loudly, when SeqGPT is not here."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from model.build import build_engine
from model.config import DEFAULT_MODEL, EngineSettings
from model.runner.loading import DEMO_MODEL_DIR, MANIFEST, _in_hub_cache, resolve_model_path
from ops.eval.table import BASELINE, LEXICON, PRODUCT
from ops.train.demo_model import DemoPlan, build, export_best
from ops.train.recipe import Recipe

TINY_PLAN = DemoPlan(
    recipe=Recipe(steps=4, lr=1e-3, warmup_steps=2, hidden_size=32, n_layer=2, n_head=2, tokenizer="char"),
    batch_tokens=600,
    curriculum_steps=2,
    checkpoint_every=2,
    snapshot_every=2,
    tokenizer_documents=20,
)


@pytest.fixture(autouse=True)
def one_thread():
    # Bit-equal runs need the same reduction order, and the machine is shared.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_resumed_build_equals_one_that_never_stopped(tmp_path: Path) -> None:
    straight = build(TINY_PLAN, tmp_path / "straight", log=lambda _: None)
    stopped = build(TINY_PLAN, tmp_path / "resumed", log=lambda _: None, stop_after_s=0.0)
    assert stopped.name == "step-000002"
    resumed = build(TINY_PLAN, tmp_path / "resumed", log=lambda _: None)
    assert resumed.name == straight.name == "step-000004"
    a, b = load_file(straight / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    manifest = json.loads((resumed / MANIFEST).read_text())
    assert manifest["steps"] == 4 and manifest["demo"] is True
    assert manifest["weights_sha256"] == hashlib.sha256((resumed / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["schedule"] == [[0, 4]]
    longer = build(replace(TINY_PLAN, recipe=replace(TINY_PLAN.recipe, steps=6)), tmp_path / "resumed", log=print)
    assert json.loads((longer / MANIFEST).read_text())["schedule"] == [[0, 4], [4, 6]]


def test_batches_made_ahead_by_worker_processes_train_the_same_weights(tmp_path: Path) -> None:
    here = build(TINY_PLAN, tmp_path / "here", log=lambda _: None)
    ahead = build(TINY_PLAN, tmp_path / "ahead", log=lambda _: None, workers=2)
    a, b = load_file(here / "model.safetensors"), load_file(ahead / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert "cores on the machine" in json.loads((ahead / MANIFEST).read_text())["hardware"]


def test_export_ships_the_best_snapshot_with_its_held_out_numbers(tmp_path: Path) -> None:
    build(TINY_PLAN, tmp_path / "run", log=lambda _: None)
    shipped, table = export_best(tmp_path / "run", documents=3, candidates=2, destination=tmp_path / "demo")
    manifest = json.loads((shipped / MANIFEST).read_text())
    systems = manifest["evaluation"]["systems"]
    assert {PRODUCT, BASELINE} <= set(systems) and systems[PRODUCT]["documents"] == 3
    assert "seed=2" in manifest["evaluation"]["corpus"]
    # The hand-written corpora are scored beside it, product and both baselines.
    for corpus in ("freeform", "layouts", "mixed"):
        assert set(manifest["evaluation"][corpus]["systems"]) == {PRODUCT, BASELINE, LEXICON}
        assert f"{corpus}.jsonl" in table
    assert (shipped / "EVAL.txt").read_text(encoding="utf-8") == table + "\n"


def test_a_fine_tune_starts_from_a_trained_model_and_names_it(tmp_path: Path) -> None:
    first = build(TINY_PLAN, tmp_path / "first", log=lambda _: None)
    # A recipe of other sizes: the fine-tune keeps its start's, and its manifest says so.
    other = replace(TINY_PLAN, recipe=replace(TINY_PLAN.recipe, hidden_size=48, n_head=4))
    tuned = build(other, tmp_path / "tuned", log=lambda _: None, init_from=first)
    again = build(TINY_PLAN, tmp_path / "again", log=lambda _: None, init_from=tuned)
    manifest = json.loads((tuned / MANIFEST).read_text())
    assert manifest["fine_tuned_from"]["weights_sha256"] == json.loads((first / MANIFEST).read_text())["weights_sha256"]
    assert (manifest["settings"]["hidden_size"], manifest["settings"]["n_head"]) == (32, 2)
    # A fine-tune of a fine-tune names the whole line back to a model trained from scratch.
    line = json.loads((again / MANIFEST).read_text())["fine_tuned_from"]
    assert (line["path"], line["steps"], line["fine_tuned_from"]["path"]) == (str(tuned), 4, str(first))
    assert line["fine_tuned_from"]["fine_tuned_from"] is None
    # Its tokenizer is the trained model's, and training moved the weights on from there.
    assert (tuned / "tokenizer.json").read_bytes() == (first / "tokenizer.json").read_bytes()
    a, b = load_file(first / "model.safetensors"), load_file(tuned / "model.safetensors")
    assert a.keys() == b.keys() and not all(torch.equal(a[k], b[k]) for k in a)


def test_the_shipped_demo_model_is_small_and_says_what_it_reached() -> None:
    weights = DEMO_MODEL_DIR / "model.safetensors"
    assert weights.stat().st_size <= 40 * 2**20
    manifest = json.loads((DEMO_MODEL_DIR / MANIFEST).read_text())
    assert manifest["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert manifest["steps"] > 0 and manifest["train_seconds"] > 0
    assert manifest["evaluation"]["systems"][PRODUCT]["documents"] >= 200


def test_without_seqgpt_the_default_model_is_the_demo_and_says_so(caplog) -> None:
    if _in_hub_cache(DEFAULT_MODEL):
        pytest.skip("SeqGPT-560M is in this machine's hub cache: the default is the real model")
    assert resolve_model_path(DEFAULT_MODEL) == (str(DEMO_MODEL_DIR), True)
    assert resolve_model_path(str(DEMO_MODEL_DIR)) == (str(DEMO_MODEL_DIR), False)
    with caplog.at_level(logging.WARNING, logger="model.runner.loading"):
        engine = build_engine(EngineSettings(device="cpu"))
    assert engine.info.demo and engine.info.name == "seqstream-demo"
    assert any("DEMO MODEL" in r.getMessage() for r in caplog.records)
