"""What each greedy step tells us about the model's certainty: chosen token, its probability,
the entropy of the full next-token distribution, and the runners-up.

Computed in fp32 whatever the model's dtype: BF16 probabilities are too coarse to gate on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class StepSignals:
    """One decode step for a whole batch; every tensor has the batch as its first dimension."""

    chosen: torch.Tensor  # [B] token id, argmax with ties to the lowest id
    prob: torch.Tensor  # [B]
    entropy: torch.Tensor  # [B] nats
    top_ids: torch.Tensor  # [B, k]
    top_probs: torch.Tensor  # [B, k]
    forced: torch.Tensor | None = None  # [B] bool: the constraint left one legal token


def greedy_choice(logits: torch.Tensor) -> torch.Tensor:
    # torch.argmax returns the first maximal index, so ties go to the lowest token id.
    return logits.argmax(dim=-1)


def step_signals(logits: torch.Tensor, k: int) -> StepSignals:
    logits = logits.float()
    log_probs = torch.log_softmax(logits, dim=-1)
    probs = log_probs.exp()
    chosen = greedy_choice(logits)
    top_probs, top_ids = probs.topk(min(k + 1, probs.shape[-1]), dim=-1)
    return StepSignals(
        chosen=chosen,
        prob=probs.gather(-1, chosen[:, None])[:, 0],
        # -sum p log p; the clamp makes p = 0 entries contribute 0 instead of 0 * -inf = nan.
        entropy=-(probs * log_probs.clamp_min(torch.finfo(log_probs.dtype).min)).sum(dim=-1),
        top_ids=top_ids,
        top_probs=top_probs,
    )


@dataclass
class Generation:
    """The greedy continuation of one prompt, up to and including end-of-sequence if reached."""

    token_ids: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    top_ids: list[list[int]] = field(default_factory=list)
    top_probs: list[list[float]] = field(default_factory=list)
    finished: bool = False
    # Per step, for the audit trail; empty means no step was (the reference engine's case).
    forced: list[bool] = field(default_factory=list)
    drafted: list[bool] = field(default_factory=list)


def collect_generations(steps: list[StepSignals], eos_id: int) -> list[Generation]:
    """Per-row generations from per-step batch signals, each cut after its first end-of-sequence."""
    if not steps:
        return []
    chosen = torch.stack([s.chosen for s in steps], dim=1).tolist()
    probs = torch.stack([s.prob for s in steps], dim=1).tolist()
    entropies = torch.stack([s.entropy for s in steps], dim=1).tolist()
    top_ids = torch.stack([s.top_ids for s in steps], dim=1).tolist()
    top_probs = torch.stack([s.top_probs for s in steps], dim=1).tolist()
    forced = torch.stack([s.forced for s in steps], dim=1).tolist() if steps[0].forced is not None else None
    generations = []
    for row, ids in enumerate(chosen):
        length = ids.index(eos_id) + 1 if eos_id in ids else len(ids)
        generations.append(
            Generation(
                token_ids=ids[:length],
                probs=probs[row][:length],
                entropies=entropies[row][:length],
                top_ids=top_ids[row][:length],
                top_probs=top_probs[row][:length],
                finished=eos_id in ids,
                forced=forced[row][:length] if forced is not None else [],
            )
        )
    return generations
