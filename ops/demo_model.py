"""`seqstream-ops demo-model build`: the shipped demo model (model/demo/), trained with the project's
recipe (ops/train.py) on generated documents, deterministically from a seed.

What is added to the recipe for a small model that must learn to *copy* values from unseen text:
- a character tokenizer, so a value's tokens are the document's tokens one for one;
- a language-model loss on the document tokens (half the answer's weight), so the model reads the
  text it will have to copy from;
- a curriculum: brief documents (~150 characters) first, full ones (up to ~900) mixed in as
  training proceeds, so the first steps are cheap and the copying pattern is found on short texts;
- packed batches: each step fills a token budget with rows of similar length (one kind of document
  length per step), so little compute goes to padding and no document attends to another;
- fresh documents every step (the generator costs ~1.5 ms a document), so names cannot be learnt
  by heart and copying is the only way to lower the loss.

Training checkpoints (model, optimizer, step) go outside git, by default ~/.cache/seqstream/demo-train/,
every `checkpoint_every` steps, so a run stopped by a session's end continues in the next one with
the same batches it would have seen (each step's documents are a function of the seed and the step).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec
import torch

from model.answers.prompt import build_prompt
from model.build import build_engine
from model.config import EngineSettings
from model.runner.loading import MANIFEST
from ops.accuracy import evaluate, read_corpus
from ops.corpus import KINDS, GeneratedDocument, generate_corpus, generate_document, write_corpus
from ops.eval_table import PRODUCT, as_json, baselines, format_table
from ops.tiny import init_tiny_bloom
from ops.train import RECIPE_VERSION, Recipe, TrainingExample, make_tokenizer, train, training_examples
from schemas.decode import decode_document
from schemas.field_sets import FIELD_SETS

DEMO_DIR = Path(__file__).resolve().parent.parent / "model" / "demo"
TRAIN_DIR = Path.home() / ".cache" / "seqstream" / "demo-train"
GENERATOR_SEED = 1
# The held-out evaluation corpus: another generator seed, so no training document is in it.
EVAL_SEED = 2
# The prompt must fit the engine's default input window (1,024 tokens, one per character here):
# longer training documents would be cut and teach answers that are not in the text.
MAX_TRAIN_CHARS = 900
BRIEF_CHARS = 300
# Full documents are 360-990 characters; the curriculum admits them from this length up.
FIRST_FULL_CHARS = 450
# Candidates drawn per step at most (~1.5 ms each); at the shortest limit about one in twelve fits.
MAX_CANDIDATES = 4096


@dataclass(frozen=True)
class DemoPlan:
    recipe: Recipe
    batch_tokens: int = 2048
    # Steps over which full documents go from none to `full_share` of the batches, and their
    # longest allowed length from FIRST_FULL_CHARS to MAX_TRAIN_CHARS.
    curriculum_steps: int = 2500
    full_share: float = 0.6
    checkpoint_every: int = 100
    snapshot_every: int = 500
    # Generated documents whose characters make the tokenizer's vocabulary (others fall back to bytes).
    tokenizer_documents: int = 4000


DEMO_PLAN = DemoPlan(
    recipe=Recipe(
        seed=0,
        steps=9500,
        batch_size=0,  # unused: batches fill `batch_tokens`
        lr=2e-3,
        warmup_steps=200,
        doc_loss_weight=0.5,
        hidden_size=128,
        n_layer=4,
        n_head=4,
        tokenizer="char",
    )
)


def as_labelled(doc: GeneratedDocument):
    return decode_document(msgspec.json.encode(doc.raw()), 1 << 24), doc.values()


def tokenizer_texts(seed: int, documents: int) -> list[str]:
    """Every character of `documents` generated documents (full and brief) and of every prompt's fixed words."""
    docs = [d.text for d in generate_corpus(documents, seed)]
    docs += [d.text for d in generate_corpus(documents, seed, brief=True)]
    prompts = [build_prompt("", "extract", labels) + "None\t:" for labels in FIELD_SETS.values()]
    return [*docs, *prompts, "".join(chr(c) for c in range(32, 127)) + "\n\t"]


class DocumentStream:
    """Step -> batch: fresh generated documents, brief or full by the curriculum, as many rows of
    similar length as fit the token budget."""

    def __init__(self, tokenizer, plan: DemoPlan, seed: int) -> None:
        self.tokenizer, self.plan, self.seed = tokenizer, plan, seed
        self.kinds = sorted(KINDS)

    def full_share(self, step: int) -> float:
        return self.plan.full_share * min(1.0, step / max(1, self.plan.curriculum_steps))

    def max_chars(self, step: int) -> int:
        progress = min(1.0, step / max(1, self.plan.curriculum_steps))
        return int(FIRST_FULL_CHARS + (MAX_TRAIN_CHARS - FIRST_FULL_CHARS) * progress)

    def __call__(self, step: int) -> list[TrainingExample]:
        rng = random.Random(self.seed * 1_000_003 + step)
        brief = rng.random() >= self.full_share(step)
        limit = BRIEF_CHARS if brief else self.max_chars(step)
        rows: list[TrainingExample] = []
        for index in range(step * MAX_CANDIDATES, (step + 1) * MAX_CANDIDATES):
            doc = generate_document(rng.choice(self.kinds), self.seed, index, brief=brief)
            if len(doc.text) > limit:
                continue
            recipe = self.plan.recipe
            new = training_examples(
                self.tokenizer, [as_labelled(doc)], recipe.labels_per_prompt, recipe.max_input_tokens
            )
            longest = max(len(e.prompt) + len(e.answer) for e in [*rows, *new])
            if rows and longest * (len(rows) + len(new)) > self.plan.batch_tokens:
                return rows
            rows.extend(new)
        raise RuntimeError(f"step {step}: {MAX_CANDIDATES} documents drawn and the batch is not full")


def checkpoint_path(train_dir: Path) -> Path:
    return train_dir / "checkpoint.pt"


def build(
    plan: DemoPlan, train_dir: Path, *, log: Callable[[str], None] = print, stop_after_s: float | None = None
) -> Path:
    """Train (or resume) the demo model; checkpoints and step snapshots land in `train_dir`."""
    recipe = plan.recipe
    train_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(recipe.seed)
    tokenizer_dir = train_dir / "tokenizer"
    if tokenizer_dir.is_dir():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, padding_side="left")
    else:
        tokenizer = make_tokenizer(recipe, tokenizer_texts(GENERATOR_SEED, plan.tokenizer_documents))
        tokenizer.save_pretrained(tokenizer_dir)
    model = init_tiny_bloom(
        tokenizer, seed=recipe.seed, hidden_size=recipe.hidden_size, n_layer=recipe.n_layer, n_head=recipe.n_head
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    state = {"step": 0, "train_seconds": 0.0, "losses": []}
    if checkpoint_path(train_dir).is_file():
        saved = torch.load(checkpoint_path(train_dir), weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        log(f"resuming at step {state['step']} ({state['train_seconds']:.0f} s trained so far)")
    # (step, total steps) each time the schedule was set: a run extended past its end (SGDR-style
    # warm restart of the cosine) is not one planned that long, and its manifest must say so.
    schedule = state.setdefault("schedule", [[0, recipe.steps]])
    if schedule[-1][1] != recipe.steps:
        schedule.append([state["step"], recipe.steps])
    stream = DocumentStream(tokenizer, plan, GENERATOR_SEED)
    started = time.perf_counter()
    trained_before = state["train_seconds"]
    window: list[float] = []

    class Stop(Exception):
        pass

    def on_step(step: int, loss: float) -> None:
        window.append(loss)
        state["step"] = step + 1
        state["train_seconds"] = trained_before + time.perf_counter() - started
        if state["step"] % plan.checkpoint_every == 0:
            state["losses"].append([state["step"], round(sum(window) / len(window), 4)])
            log(f"step {state['step']} loss {sum(window) / len(window):.4f} ({state['train_seconds']:.0f} s)")
            window.clear()
            save_checkpoint(train_dir, model, optimizer, state)
            if state["step"] % plan.snapshot_every == 0:
                snapshot(train_dir / f"step-{state['step']:06d}", model, tokenizer, plan, state)
            if stop_after_s is not None and time.perf_counter() - started > stop_after_s:
                raise Stop

    try:
        train(model, [], recipe, int(tokenizer.pad_token_id), start_step=state["step"], optimizer=optimizer,
              on_step=on_step, batches=stream)  # fmt: skip
    except Stop:
        log(f"stopped after {stop_after_s} s at step {state['step']}; resume with the same command")
    save_checkpoint(train_dir, model, optimizer, state)
    return snapshot(train_dir / f"step-{state['step']:06d}", model, tokenizer, plan, state)


def save_checkpoint(train_dir: Path, model, optimizer, state: dict) -> None:
    partial = checkpoint_path(train_dir).with_suffix(".partial")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state}, partial)
    partial.replace(checkpoint_path(train_dir))  # a kill mid-write leaves the previous checkpoint whole


def snapshot(directory: Path, model, tokenizer, plan: DemoPlan, state: dict) -> Path:
    """A loadable model directory for step `state['step']`, with a manifest of how it was trained."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    write_manifest(directory, plan, state, evaluation=None)
    return directory


def write_manifest(directory: Path, plan: DemoPlan, state: dict, evaluation: dict | None) -> None:
    weights = directory / "model.safetensors"
    manifest = {
        "recipe": "seqstream-train",
        "recipe_version": RECIPE_VERSION,
        "demo": True,
        "settings": asdict(plan.recipe),
        "plan": {k: v for k, v in asdict(plan).items() if k != "recipe"},
        "generator_seed": GENERATOR_SEED,
        "steps": state["step"],
        "train_seconds": round(state["train_seconds"], 1),
        "hardware": f"{cpu_name()} ({os.cpu_count()} cores on the machine), {torch.get_num_threads()} torch thread",
        "schedule": state.get("schedule"),
        "loss_curve": state["losses"],
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else None,
        "evaluation": evaluation,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def export(snapshot_dir: Path, evaluation: dict, table: str, destination: Path = DEMO_DIR) -> Path:
    """Copy a snapshot to `destination` (model/demo/) with its manifest completed by `evaluation`,
    and the same table as text beside it (EVAL.txt) for a reader."""
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(snapshot_dir, destination)
    manifest = json.loads((destination / MANIFEST).read_text())
    manifest["evaluation"] = evaluation
    (destination / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    (destination / "EVAL.txt").write_text(table + "\n", encoding="utf-8")
    return destination


def snapshots(train_dir: Path) -> list[Path]:
    """The step snapshots of a run, oldest first."""
    return sorted(p for p in train_dir.glob("step-*") if (p / "model.safetensors").is_file())


def heldout_corpus(path: Path, documents: int) -> Path:
    """`documents` full-length documents from EVAL_SEED (none of them seen in training), with truth."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_corpus(path, generate_corpus(documents, EVAL_SEED))
    return path


def export_best(
    train_dir: Path,
    documents: int,
    candidates: int,
    *,
    log: Callable[[str], None] = print,
    batch_size: int = 16,
    destination: Path = DEMO_DIR,
) -> tuple[Path, str]:
    """Score the last `candidates` snapshots' product decoding on the held-out corpus and ship the
    best (micro F1) to model/demo/, its manifest completed with the table it reached beside its
    baselines (also returned as text). The baselines are run for the best only: they do not choose,
    and the unconstrained decoding, which rarely stops early, is the slowest column."""
    corpus = heldout_corpus(train_dir / "heldout" / f"seed{EVAL_SEED}-{documents}.jsonl", documents)
    docs, truth, kinds = read_corpus(corpus)
    scored = []
    for directory in snapshots(train_dir)[-candidates:]:
        report = evaluate(build_engine(EngineSettings(path=str(directory))), docs, truth, batch_size, kinds)
        f1 = report.as_dict()["micro"]["f1"]
        log(f"{directory.name}: product micro F1 {f1:.3f} ({report.seconds:.0f} s)")
        scored.append((f1, directory.name, directory, report))
    if not scored:
        raise FileNotFoundError(f"no snapshots in {train_dir}; run `seqstream-ops demo-model build` first")
    _, _, best, report = max(scored)
    settings = EngineSettings(path=str(best))
    reports = {PRODUCT: report}
    for name, engine in baselines(settings, build_engine):
        reports[name] = evaluate(engine, docs, truth, batch_size, kinds)
        log(f"{best.name}: {name} scored ({reports[name].seconds:.0f} s)")
    table = as_json(reports, corpus)
    table["corpus"] = f"generate_corpus({documents}, seed={EVAL_SEED}): full-length documents, no noise"
    command = f"$ seqstream-ops demo-model export --documents {documents} --candidates {candidates}"
    text = f"{command}   # {best.name}; {table['corpus']}\n\n{format_table(reports)}"
    return export(best, table, text, destination), text
