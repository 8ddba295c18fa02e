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
    # With drafts, one forward pass verifies several steps and rows take different numbers of them:
    # taken [B] says which rows' generations this step belongs to, drafted [B] which were drafts.
    taken: torch.Tensor | None = None
    drafted: torch.Tensor | None = None


def greedy_choice(logits: torch.Tensor) -> torch.Tensor:
    # torch.argmax returns the first maximal index, so ties go to the lowest token id.
    return logits.argmax(dim=-1)


def step_signals(logits: torch.Tensor, k: int, unmasked: torch.Tensor | None = None) -> StepSignals:
    """Choice, probabilities and alternatives from `logits` (masked, when decoding is constrained);
    the entropy from `unmasked`, the model's full distribution, when given: the alarm is about how
    unsure the model is, which the mask would hide (a forced step has entropy 0).

    Over a vocabulary of 250,880 every pass over [B, V] counts: a standalone `exp` of it costs 3-4x
    a fused softmax on the CPU, so probabilities are exponentiated only for the k + 1 kept entries.
    """
    full = unmasked is None or unmasked is logits
    logits = logits.float()
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = greedy_choice(logits)
    top_log_probs, top_ids = log_probs.topk(min(k + 1, log_probs.shape[-1]), dim=-1)
    return StepSignals(
        chosen=chosen,
        prob=log_probs.gather(-1, chosen[:, None])[:, 0].exp(),
        entropy=entropy(logits, log_probs) if full else entropy(unmasked),
        top_ids=top_ids,
        top_probs=top_log_probs.exp(),
    )


def entropy(logits: torch.Tensor, log_probs: torch.Tensor | None = None) -> torch.Tensor:
    """-sum p log p over the last dimension; `log_probs`, if the caller has them, saves a pass."""
    logits = logits.float()
    if log_probs is None:
        log_probs = torch.log_softmax(logits, dim=-1)
    # The clamp makes p = 0 entries (masked to -inf) contribute 0 instead of 0 * -inf = nan.
    return -torch.linalg.vecdot(torch.softmax(logits, dim=-1), log_probs.clamp_min(torch.finfo(log_probs.dtype).min))


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
    forced = _flags(steps, "forced")
    drafted = _flags(steps, "drafted")
    taken = _flags(steps, "taken")
    generations = []
    for row, ids in enumerate(chosen):
        keep = [i for i, t in enumerate(taken[row]) if t] if taken is not None else list(range(len(ids)))
        ids = [ids[i] for i in keep]
        length = ids.index(eos_id) + 1 if eos_id in ids else len(ids)
        keep = keep[:length]
        generations.append(
            Generation(
                token_ids=ids[:length],
                probs=[probs[row][i] for i in keep],
                entropies=[entropies[row][i] for i in keep],
                top_ids=[top_ids[row][i] for i in keep],
                top_probs=[top_probs[row][i] for i in keep],
                finished=eos_id in ids,
                forced=[forced[row][i] for i in keep] if forced is not None else [],
                drafted=[drafted[row][i] for i in keep] if drafted is not None else [],
            )
        )
    return generations


def _flags(steps: list[StepSignals], name: str) -> list[list[bool]] | None:
    if getattr(steps[0], name) is None:
        return None
    return torch.stack([getattr(s, name) for s in steps], dim=1).tolist()


def cut(generation: Generation, limit: int) -> Generation:
    """The first `limit` steps of a generation (unfinished if its end-of-sequence came later)."""
    if len(generation.token_ids) <= limit:
        return generation
    return Generation(
        token_ids=generation.token_ids[:limit],
        probs=generation.probs[:limit],
        entropies=generation.entropies[:limit],
        top_ids=generation.top_ids[:limit],
        top_probs=generation.top_probs[:limit],
        finished=False,
        forced=generation.forced[:limit],
        drafted=generation.drafted[:limit],
    )
