"""`seqstream-ops demo-model build`: the shipped demo model (model/demo/), trained with the project's
recipe (ops/train/recipe.py) on generated documents, deterministically from a seed.

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
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from model.answers.prompt import build_prompt
from model.runner.loading import MANIFEST
from ops.corpus import KINDS, generate_corpus, generate_document, write_corpus
from ops.corpus.generate import read_documents, truth_path
from ops.train.demo_data import UNHELD_LABELS, DataMix, DocumentStream
from ops.train.recipe import RECIPE_VERSION, Recipe, TrainingExample, make_tokenizer, train
from ops.train.tiny import init_tiny_bloom
from schemas.field_sets import FIELD_SETS

DEMO_DIR = Path(__file__).resolve().parents[2] / "model" / "demo"
TRAIN_DIR = Path.home() / ".cache" / "seqstream" / "demo-train"
GENERATOR_SEED = 1
# The held-out evaluation corpus: another generator seed, so no training document is in it.
EVAL_SEED = 2
# Hand-written documents in free phrasing, with their truth: no template made them, none is trained on.
FREEFORM_CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "freeform.jsonl"
# Hand-written documents in real-world layouts (ops/corpus/layouts.txt): the same, by another method.
LAYOUTS_CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "layouts.jsonl"
# Hand-written documents in the shapes the first two lack (ops/corpus/mixed.txt): mixed Chinese-English
# names, addresses with building numbers, lists for one label, dates and amounts in words, OCR breaks.
MIXED_CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "mixed.jsonl"
# (key in the manifest, file, title in EVAL.txt): scored beside every export, never used to choose.
HAND_WRITTEN_CORPORA = (
    ("freeform", FREEFORM_CORPUS, "hand-written free phrasing"),
    ("layouts", LAYOUTS_CORPUS, "hand-written real-world layouts"),
    ("mixed", MIXED_CORPUS, "hand-written mixed-script names, addresses, words and OCR breaks"),
)
# The prompt must fit the engine's default input window (1,024 tokens, one per character here):
# longer training documents would be cut and teach answers that are not in the text.
MAX_TRAIN_CHARS = 900
BRIEF_CHARS = 300
# Full documents are 360-990 characters; the curriculum admits them from this length up.
FIRST_FULL_CHARS = 450
# Candidates drawn per step at most (~1.5 ms each); at the shortest limit about one in twelve fits.
MAX_CANDIDATES = 4096
# GB2312's first level: the 3,755 most used hanzi. In the tokenizer's vocabulary, a name the
# generator never writes is still one token per character (copyable), not a run of UTF-8 bytes.
COMMON_HANZI = bytes(b for hi in range(0xB0, 0xD8) for lo in range(0xA1, 0xFF) for b in (hi, lo))


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
    brief_chars: int = BRIEF_CHARS
    first_full_chars: int = FIRST_FULL_CHARS
    max_train_chars: int = MAX_TRAIN_CHARS
    max_candidates: int = MAX_CANDIDATES
    mix: DataMix = field(default_factory=DataMix)


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


def tokenizer_texts(seed: int, documents: int) -> list[str]:
    """Every character of `documents` generated documents (templated full and brief, free), of every
    prompt's fixed words and labels, and the common hanzi."""
    docs = [d.text for d in generate_corpus(documents, seed)]
    docs += [d.text for d in generate_corpus(documents, seed, brief=True)]
    free = sorted(KINDS) * max(1, documents // 20)
    docs += [generate_document(kind, seed, i, free=True).text for i, kind in enumerate(free)]
    labels = [*FIELD_SETS.values(), UNHELD_LABELS]
    prompts = [build_prompt("", "extract", chunk) + "None\t:" for chunk in labels]
    common = COMMON_HANZI.decode("gb2312", errors="ignore")
    return [*docs, *prompts, common, "".join(chr(c) for c in range(32, 127)) + "\n\t"]


def checkpoint_path(train_dir: Path) -> Path:
    return train_dir / "checkpoint.pt"


def seed_everything(seed: int, device: torch.device) -> None:
    """Seeds torch (CPU and every CUDA device). The data needs none: it is a function of (seed, step).
    CUDA runs are seeded but not bit-reproducible (atomics in backward); CPU runs on one thread are."""
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)
        # TF32 matmuls: fp32 weights and optimizer, ~8x faster products on Hopper, loss unchanged in practice.
        torch.set_float32_matmul_precision("high")


def build(
    plan: DemoPlan,
    train_dir: Path,
    *,
    log: Callable[[str], None] = print,
    stop_after_s: float | None = None,
    device: str = "cpu",
    workers: int = 0,
    init_from: Path | None = None,
    corpus: Path | None = None,
) -> Path:
    """Train (or resume) the demo model on `device`, its batches made by `workers` processes
    (0: in this one); checkpoints and step snapshots land in `train_dir`. `init_from`: a trained
    model directory (model/demo/) whose tokenizer and weights a fresh run starts from (fine-tuning:
    its sizes, not the recipe's, apply); a resumed run takes its checkpoint instead."""
    from transformers import AutoTokenizer, BloomForCausalLM

    recipe = plan.recipe
    train_dir.mkdir(parents=True, exist_ok=True)
    target = torch.device(device)
    seed_everything(recipe.seed, target)
    tokenizer_dir = train_dir / "tokenizer"
    if tokenizer_dir.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, padding_side="left")
    elif init_from is not None:
        tokenizer = AutoTokenizer.from_pretrained(init_from, padding_side="left")
        tokenizer.save_pretrained(tokenizer_dir)
    else:
        tokenizer = make_tokenizer(recipe, tokenizer_texts(GENERATOR_SEED, plan.tokenizer_documents))
        tokenizer.save_pretrained(tokenizer_dir)
    if init_from is not None:
        model = BloomForCausalLM.from_pretrained(init_from, dtype=torch.float32)
    else:
        model = init_tiny_bloom(
            tokenizer, seed=recipe.seed, hidden_size=recipe.hidden_size, n_layer=recipe.n_layer, n_head=recipe.n_head
        )
    model.to(target)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    state = {"step": 0, "train_seconds": 0.0, "losses": []}
    if init_from is not None:
        # What the fine-tune started from, by content: the manifest must name the weights, not a path.
        state["init_from"] = lineage(init_from)
    if checkpoint_path(train_dir).is_file():
        # Saved on any device, resumed on any: the optimizer's moments follow the parameters' device.
        saved = torch.load(checkpoint_path(train_dir), weights_only=False, map_location=target)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        log(f"resuming at step {state['step']} ({state['train_seconds']:.0f} s trained so far)")
    # (step, total steps) each time the schedule was set: a run extended past its end (SGDR-style
    # warm restart of the cosine) is not one planned that long, and its manifest must say so.
    schedule = state.setdefault("schedule", [[0, recipe.steps]])
    if schedule[-1][1] != recipe.steps:
        schedule.append([state["step"], recipe.steps])
    labelled = read_documents(corpus) if corpus is not None else []
    if corpus is not None:
        # What the run also learnt from, by content (a reviewed corpus grows between runs).
        digest = hashlib.sha256(corpus.read_bytes() + truth_path(corpus).read_bytes()).hexdigest()
        state["corpus"] = {"path": str(corpus), "documents": len(labelled), "sha256": digest}
        log(f"{len(labelled)} labelled documents from {corpus}, {plan.mix.reviewed:.0%} of each step's draws")
    stream = DocumentStream(tokenizer, plan, GENERATOR_SEED, plan.mix, labelled)
    batches = prefetched(stream, state["step"], recipe.steps, workers) if workers else stream
    state["device"] = device_name(target)
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
              on_step=on_step, batches=batches, device=target)  # fmt: skip
    except Stop:
        log(f"stopped after {stop_after_s} s at step {state['step']}; resume with the same command")
    save_checkpoint(train_dir, model, optimizer, state)
    return snapshot(train_dir / f"step-{state['step']:06d}", model, tokenizer, plan, state)


def prefetched(stream: DocumentStream, start: int, stop: int, workers: int) -> Callable[[int], list[TrainingExample]]:
    """`stream`'s batches for steps start..stop-1, made ahead by `workers` processes: on a GPU one
    Python process cannot generate documents as fast as the steps consume them. Same batches, in
    order, as `stream(step)`: each is a function of its step alone."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        StepBatches(stream, start, stop), batch_size=None, num_workers=workers, prefetch_factor=8, collate_fn=_as_is
    )
    ahead = iter(loader)

    def batch(step: int) -> list[TrainingExample]:
        made, rows = next(ahead)
        if made != step:
            raise RuntimeError(f"prefetched batch {made} where step {step} was asked for")
        return rows

    return batch


class StepBatches(torch.utils.data.Dataset):
    def __init__(self, stream: DocumentStream, start: int, stop: int) -> None:
        self.stream, self.start, self.stop = stream, start, stop

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __getitem__(self, index: int) -> tuple[int, list[TrainingExample]]:
        return self.start + index, self.stream(self.start + index)


def _as_is(item):
    return item


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_name()} ({os.cpu_count()} cores on the machine), {torch.get_num_threads()} torch thread(s)"


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


def lineage(model_dir: Path) -> dict:
    """What a fine-tune started from: its weights by content, and where its manifest is on this
    machine, the steps, hardware and time that made them and what they in turn started from."""
    weights = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
    out: dict = {"path": str(model_dir), "weights_sha256": weights}
    manifest_path = model_dir / MANIFEST
    if manifest_path.is_file():
        parent = json.loads(manifest_path.read_text())
        out |= {key: parent.get(key) for key in ("steps", "train_seconds", "hardware")}
        earlier = parent.get("fine_tuned_from")
        if earlier and Path(earlier["path"]).is_dir():
            earlier = lineage(Path(earlier["path"]))
        out["fine_tuned_from"] = earlier
    return out


def model_sizes(directory: Path) -> dict:
    """The sizes a model directory's weights have (a fine-tune keeps its start's, whatever its recipe says)."""
    config = json.loads((directory / "config.json").read_text())
    return {"hidden_size": config["hidden_size"], "n_layer": config["n_layer"], "n_head": config["n_head"]}


def write_manifest(directory: Path, plan: DemoPlan, state: dict, evaluation: dict | None) -> None:
    weights = directory / "model.safetensors"
    manifest = {
        "recipe": "seqstream-train",
        "recipe_version": RECIPE_VERSION,
        "demo": True,
        "settings": asdict(plan.recipe) | model_sizes(directory),
        "plan": {k: v for k, v in asdict(plan).items() if k != "recipe"},
        "generator_seed": GENERATOR_SEED,
        "steps": state["step"],
        "train_seconds": round(state["train_seconds"], 1),
        "hardware": state.get("device") or device_name(torch.device("cpu")),
        "schedule": state.get("schedule"),
        "fine_tuned_from": state.get("init_from"),
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
    # Manifests written before these were recorded get them here, from the files themselves.
    manifest["settings"] |= model_sizes(destination)
    start = manifest.get("fine_tuned_from")
    if start and "steps" not in start and Path(start["path"]).is_dir():
        manifest["fine_tuned_from"] = lineage(Path(start["path"]))
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
    # Here, not at the top: training (`build`) must run where only torch and transformers are, and
    # the engines bring the product's decoding and the evaluation along.
    from model.build import build_engine
    from model.config import EngineSettings
    from ops.eval.accuracy import evaluate, read_corpus
    from ops.eval.table import BASELINE, LEXICON, PRODUCT, as_json, baselines, format_table

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
    engines = {PRODUCT: build_engine(settings), **dict(baselines(settings, build_engine))}
    for name, engine in engines.items():
        if name == PRODUCT:
            continue
        reports[name] = evaluate(engine, docs, truth, batch_size, kinds)
        log(f"{best.name}: {name} scored ({reports[name].seconds:.0f} s)")
    table = as_json(reports, corpus)
    table["corpus"] = f"generate_corpus({documents}, seed={EVAL_SEED}): full-length documents, no noise"
    command = f"$ seqstream-ops demo-model export --documents {documents} --candidates {candidates}"
    text = f"{command}   # {best.name}; {table['corpus']}\n\n{format_table(reports)}"
    # The hand-written corpora are scored, never used to choose: they stay tests of generalisation.
    for key, corpus_file, title in HAND_WRITTEN_CORPORA:
        hand_docs, hand_truth, hand_kinds = read_corpus(corpus_file)
        hand = {
            name: evaluate(engines[name], hand_docs, hand_truth, batch_size, hand_kinds)
            for name in (PRODUCT, BASELINE, LEXICON)
        }
        log(f"{best.name}: {corpus_file.name} micro F1 {hand[PRODUCT].as_dict()['micro']['f1']:.3f}")
        table[key] = as_json(hand, corpus_file)
        text += f"\n\n{corpus_file.name}: {title}, never trained on\n\n{format_table(hand)}"
    return export(best, table, text, destination), text
