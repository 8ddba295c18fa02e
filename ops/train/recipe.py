"""The project's own training recipe: a BLOOM taught SeqGPT's prompt and answer format.

Examples are built with the product's own prompt code (`encode_prompts`: same label chunks, same
tail truncation) and answers in the format `parse_extraction` reads, so what the model learns is
exactly what the engines ask. The prompt and the answer are tokenised separately, as at inference,
where the answer's first token follows the prompt's last one.

Loss: cross-entropy on the answer tokens, plus a language-model loss on the prompt (document)
tokens at a lower weight; modelling the document is what lets copying from it emerge.
"""

from __future__ import annotations

import json
import math
import platform
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BloomForCausalLM, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from model.answers.parse import format_extraction
from model.answers.prompt import build_prompt, encode_prompts, prompt_chunks
from model.runner.loading import MANIFEST
from ops.train.tiny import init_tiny_bloom, train_char_tokenizer, train_tokenizer
from schemas.messages import Document

RECIPE_VERSION = 1

# A document with the values it contains, label -> values (in the order they should be written).
Labelled = tuple[Document, Mapping[str, Sequence[str]]]


@dataclass(frozen=True)
class Recipe:
    seed: int = 0
    steps: int = 300
    batch_size: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 20
    # Weight of the language-model loss on prompt tokens relative to the answer tokens.
    doc_loss_weight: float = 0.1
    vocab_size: int = 1000
    hidden_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    labels_per_prompt: int = 6
    max_input_tokens: int = 1024
    # "bpe": byte-level BPE trained on the prompts; "char": one token per character (ops/train/tiny.py).
    tokenizer: str = "bpe"
    # Background documents (`train_bloom`'s `background`) added to each step's batch, each seen once:
    # a model that has read many documents has a broad prior over values, so where it cannot place
    # the text (garbage, a document it never saw) its value steps are uncertain, not confidently wrong.
    background_per_step: int = 0


@dataclass(frozen=True)
class TrainingExample:
    prompt: list[int]
    answer: list[int]  # ends with end-of-sequence


def answer_texts(doc: Document, values: Mapping[str, Sequence[str]], labels_per_prompt: int) -> list[str]:
    """One answer per prompt chunk of `doc`, as the engines will ask for them."""
    return [format_extraction(chunk, values) for chunk in prompt_chunks(doc, labels_per_prompt)]


def tokenizer_corpus(labelled: Iterable[Labelled], labels_per_prompt: int) -> list[str]:
    """Prompts and answers: the tokenizer then has whole tokens for labels and the prompt's words."""
    corpus = []
    for doc, values in labelled:
        for chunk in prompt_chunks(doc, labels_per_prompt):
            corpus.append(build_prompt(doc.text, doc.task, chunk))
            corpus.append(format_extraction(chunk, values))
    return corpus


def training_examples(
    tokenizer: PreTrainedTokenizerBase, labelled: Iterable[Labelled], labels_per_prompt: int, max_input_tokens: int
) -> list[TrainingExample]:
    eos = int(tokenizer.eos_token_id)
    examples = []
    for doc, values in labelled:
        prompts = encode_prompts(tokenizer, doc, labels_per_prompt, max_input_tokens).prompts
        for prompt, answer in zip(prompts, answer_texts(doc, values, labels_per_prompt), strict=True):
            answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
            examples.append(TrainingExample(prompt=list(prompt), answer=[*answer_ids, eos]))
    return examples


def collate(examples: Sequence[TrainingExample], pad_id: int, doc_loss_weight: float) -> tuple[torch.Tensor, ...]:
    """Right-padded ids [B, T], attention mask [B, T] and per-target loss weights [B, T-1]."""
    width = max(len(e.prompt) + len(e.answer) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    weights = torch.zeros((len(examples), width - 1))
    for row, example in enumerate(examples):
        sequence = example.prompt + example.answer
        ids[row, : len(sequence)] = torch.tensor(sequence)
        mask[row, : len(sequence)] = 1
        # weights[t] scores the prediction of token t+1: the prompt's own tokens after the first,
        # then every answer token (its first one is predicted from the prompt's last).
        weights[row, : len(example.prompt) - 1] = doc_loss_weight
        weights[row, len(example.prompt) - 1 : len(sequence) - 1] = 1.0
    return ids, mask, weights


def weighted_loss(model: BloomForCausalLM, ids: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor):
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
    return (losses.view_as(weights) * weights).sum() / weights.sum()


def train(
    model: BloomForCausalLM,
    examples: Sequence[TrainingExample],
    recipe: Recipe,
    pad_id: int,
    *,
    start_step: int = 0,
    optimizer: torch.optim.Optimizer | None = None,
    on_step: Callable[[int, float], None] | None = None,
    batches: Callable[[int], Sequence[TrainingExample]] | None = None,
    device: torch.device | None = None,
) -> torch.optim.Optimizer:
    """AdamW with linear warm-up then cosine decay. Each step's batch is `batches(step)`, by default
    `batch_size` of `examples` drawn by a generator seeded per step; either way a run resumed at
    `start_step` sees the same batches as one that never stopped. Batches go to `device` (default: the CPU)."""
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    model.train()
    for step in range(start_step, recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = recipe.lr * _lr_factor(step, recipe)
        batch = batches(step) if batches is not None else sample_batch(examples, recipe, step)
        tensors = collate(batch, pad_id, recipe.doc_loss_weight)
        loss = weighted_loss(model, *(t.to(device, non_blocking=True) if device else t for t in tensors))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if on_step is not None:
            on_step(step, loss.item())
    model.eval()
    return optimizer


def sample_batch(examples: Sequence[TrainingExample], recipe: Recipe, step: int) -> list[TrainingExample]:
    rng = random.Random(recipe.seed * 1_000_003 + step)
    return rng.sample(list(examples), min(recipe.batch_size, len(examples)))


def make_tokenizer(recipe: Recipe, corpus: Iterable[str]) -> PreTrainedTokenizerFast:
    if recipe.tokenizer == "char":
        return train_char_tokenizer(corpus)
    return train_tokenizer(corpus, recipe.vocab_size)


def train_bloom(
    directory: Path,
    labelled: Sequence[Labelled],
    recipe: Recipe,
    *,
    background: Sequence[Labelled] = (),
    extra: dict | None = None,
) -> Path:
    """Train a tokenizer and a BLOOM from scratch on `labelled` (and `background`, in order,
    `recipe.background_per_step` examples a step) and save them as a checkpoint directory
    `model.runner.loading` loads, marked as SeqStream's own by its manifest."""
    torch.manual_seed(recipe.seed)
    started = time.perf_counter()
    tokenizer = make_tokenizer(recipe, tokenizer_corpus([*labelled, *background], recipe.labels_per_prompt))
    model = init_tiny_bloom(
        tokenizer, seed=recipe.seed, hidden_size=recipe.hidden_size, n_layer=recipe.n_layer, n_head=recipe.n_head
    )
    examples = training_examples(tokenizer, labelled, recipe.labels_per_prompt, recipe.max_input_tokens)
    extras = training_examples(tokenizer, background, recipe.labels_per_prompt, recipe.max_input_tokens)
    per_step = recipe.background_per_step

    def batches(step: int) -> list[TrainingExample]:
        return sample_batch(examples, recipe, step) + extras[step * per_step : (step + 1) * per_step]

    losses: list[float] = []
    pad = int(tokenizer.pad_token_id)
    train(model, examples, recipe, pad, on_step=lambda _, loss: losses.append(loss), batches=batches)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    manifest = {
        "recipe": "seqstream-train",
        "recipe_version": RECIPE_VERSION,
        "settings": asdict(recipe),
        "documents": len(labelled),
        "examples": len(examples),
        "background_documents": len(background),
        "final_loss": losses[-1] if losses else None,
        "train_seconds": round(time.perf_counter() - started, 1),
        "hardware": f"{platform.machine()} cpu, {torch.get_num_threads()} threads",
        **(extra or {}),
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return directory


def _lr_factor(step: int, recipe: Recipe) -> float:
    if step < recipe.warmup_steps:
        return (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(progress * math.pi))
