"""What each greedy step tells us about the model's certainty: chosen token, its probability,
the entropy of the full next-token distribution, and the runners-up.

Computed in fp32 whatever the model's dtype: BF16 probabilities are too coarse to gate on.
"""

from __future__ import annotations

from collections.abc import Sequence
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


SignalTensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
# Below this, the legal tokens' share of the full distribution has underflowed in fp32.
TINY_MASS = 1e-30


def step_signals(logits: torch.Tensor, k: int, legal: torch.Tensor | None = None) -> StepSignals:
    """Choice, probability and alternatives among the `legal` tokens (a grammar's [B, V] mask, bool or
    additive: model/grammar/protocol.py; all when None), and the entropy of the model's full
    distribution: the alarm is about how unsure the model is, which the mask would hide (a forced
    step has entropy 0)."""
    return StepSignals(*signal_tensors(logits, legal, k))


def static_path(static: bool | None, like: torch.Tensor) -> bool:
    """Whether to take the path whose shapes and control flow never depend on the data, so the host
    never waits for the device: as asked, or by default off a CPU and under compilation. Eager on a
    CPU there is nothing to wait for, and the data-dependent path does less work."""
    if static is not None:
        return static
    return like.device.type != "cpu" or torch.compiler.is_compiling()


def signal_tensors(
    logits: torch.Tensor, legal: torch.Tensor | None, k: int, static: bool | None = None
) -> SignalTensors:
    """`step_signals` as plain tensors (chosen, prob, entropy, top ids, top probs), one function the
    fast engine compiles where it compiles its decode step: the mask and every signal fuse into a
    few reads of [B, V].

    Over a vocabulary of 250,880 each pass over [B, V] counts, and so does each fresh [B, V]
    buffer: the full distribution is normalised once, its two buffers are then masked in place,
    the masked probabilities are the full ones divided by the legal tokens' share, and choice and
    runners-up come from one top-k.
    """
    x = logits.float()
    log_probs = torch.log_softmax(x, dim=-1)
    probs = log_probs.exp()
    # log_softmax is finite where logits are, so p log p needs no guard for p = 0.
    entropy = -torch.linalg.vecdot(probs, log_probs)
    if legal is not None:
        if legal.dtype == torch.bool:
            illegal = ~legal
            mass = probs.masked_fill_(illegal, 0.0).sum(-1)
            masked_log_probs = log_probs.masked_fill_(illegal, float("-inf"))
        else:
            # An additive mask (0.0 legal, -inf not: a host grammar's on a CPU): p + 0 is p, and p - inf
            # clamps to 0, the fills' very numbers, at a tenth of a bool mask's cost per entry there.
            mass = probs.add_(legal).clamp_(min=0.0).sum(-1)
            masked_log_probs = log_probs.add_(legal)
        log_mass = _log_legal_mass(mass, masked_log_probs, static)
    top_log_probs, top_ids = log_probs.topk(min(k + 1, x.shape[-1]), dim=-1)
    chosen = _greedy_choice(x, legal, top_log_probs, top_ids, static)
    chosen_log_prob = log_probs.gather(-1, chosen[:, None])[:, 0]
    if legal is None:
        return chosen, chosen_log_prob.exp(), entropy, top_ids, top_log_probs.exp()
    return (
        chosen,
        (chosen_log_prob - log_mass).exp(),
        entropy,
        top_ids,
        (top_log_probs - log_mass[:, None]).exp(),
    )


def _greedy_choice(
    x: torch.Tensor,
    legal: torch.Tensor | None,
    top_log_probs: torch.Tensor,
    top_ids: torch.Tensor,
    static: bool | None,
) -> torch.Tensor:
    """The argmax of the masked logits, ties to the lowest token id, from the top-k of the masked
    log-probabilities: a plain argmax over [B, V] costs a pass of its own. Logits a rounding apart
    may share a log-probability (never swap order), so the logits decide among the tied top."""
    top_x = x.gather(-1, top_ids)
    top = top_log_probs == top_log_probs[:, :1]
    best = torch.where(top, top_x, float("-inf")).amax(-1, keepdim=True)
    chosen = torch.where(top & (top_x == best), top_ids, x.shape[-1]).amin(-1)
    # Only if every kept entry ties may a tied one lie outside them.
    spill = top.all(-1)
    if static_path(static, x):
        return torch.where(spill, masked(x, legal).argmax(-1), chosen)
    if bool(spill.any()):
        chosen[spill] = masked(x[spill], None if legal is None else legal[spill]).argmax(-1)
    return chosen


def allowed(mask: torch.Tensor) -> torch.Tensor:
    """A grammar's mask (model/grammar/protocol.py: bool, or additive) as bool: True where legal."""
    return mask if mask.dtype == torch.bool else mask == 0


def masked(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """`scores` with the tokens a grammar's mask rules out at -inf (a new tensor; `scores` if no mask)."""
    if mask is None:
        return scores
    return scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask


def _log_legal_mass(mass: torch.Tensor, masked_log_probs: torch.Tensor, static: bool | None) -> torch.Tensor:
    """log of the legal tokens' share `mass` of the full distribution; taken from the masked
    log-probabilities for rows where the model puts so little on every legal token that the sum
    underflows."""
    if static_path(static, mass):
        return torch.where(mass > TINY_MASS, mass.log(), torch.logsumexp(masked_log_probs, -1))
    log_mass = mass.log()
    low = mass <= TINY_MASS
    if bool(low.any()):
        log_mass[low] = torch.logsumexp(masked_log_probs[low], -1)
    return log_mass


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

    def steps(self, start: int = 0, stop: int | None = None) -> Generation:
        """Steps [start, stop): finished only where the last step is kept."""
        window = slice(start, stop)
        return Generation(
            *(getattr(self, name)[window] for name in PER_STEP),
            finished=self.finished and (stop is None or stop >= len(self.token_ids)),
            forced=self.forced[window],
        )

    def choosing(self, step: int, token: int) -> Generation:
        """Step `step` alone with `token` chosen instead, one of its runners-up: the step's
        distribution as it was, the token's probability from the runners-up, not forced (a
        revisit's choice)."""
        prob = dict(zip(self.top_ids[step], self.top_probs[step], strict=True))[token]
        return Generation(
            [token],
            [prob],
            self.entropies[step : step + 1],
            self.top_ids[step : step + 1],
            self.top_probs[step : step + 1],
            forced=[False] if self.forced else [],
        )

    def __add__(self, later: Generation) -> Generation:
        """This generation's steps, then `later`'s (whose end is the whole's). A flag is kept where
        both record it at every step."""

        def flags(name: str) -> list[bool]:
            mine, theirs = getattr(self, name), getattr(later, name)
            recorded = len(mine) == len(self.token_ids) and len(theirs) == len(later.token_ids)
            return [*mine, *theirs] if recorded else []

        return Generation(
            *(getattr(self, name) + getattr(later, name) for name in PER_STEP),
            finished=later.finished,
            forced=flags("forced"),
        )


# A generation's per-step lists, in the order Generation declares them.
PER_STEP = ("token_ids", "probs", "entropies", "top_ids", "top_probs")


def collect_generations(
    steps: list[StepSignals], eos_id: int, value_only: Sequence[bool] = (), breaking: frozenset[int] = frozenset()
) -> list[Generation]:
    """Per-row generations from per-step batch signals, each cut after its first end-of-sequence, or
    for a row marked in `value_only` after its first token that ends a value (one of `breaking`)."""
    if not steps:
        return []
    chosen = torch.stack([s.chosen for s in steps], dim=1).tolist()
    # The signals become Python lists row by row, up to each row's end: a row that ended early (most
    # do: a value is a few tokens) does not pay for the steps after it. Whole, they were about a
    # tenth of the engine benchmark's run (one Python object per top-k entry per step).
    probs = torch.stack([s.prob for s in steps], dim=1)
    entropies = torch.stack([s.entropy for s in steps], dim=1)
    top_ids = torch.stack([s.top_ids for s in steps], dim=1)
    top_probs = torch.stack([s.top_probs for s in steps], dim=1)
    forced = None if steps[0].forced is None else torch.stack([s.forced for s in steps], dim=1)
    generations = []
    for row, ids in enumerate(chosen):
        ends = breaking if row < len(value_only) and value_only[row] else frozenset()
        length = next((i + 1 for i, t in enumerate(ids) if t == eos_id or t in ends), len(ids))
        generations.append(
            Generation(
                token_ids=ids[:length],
                probs=probs[row, :length].tolist(),
                entropies=entropies[row, :length].tolist(),
                top_ids=top_ids[row, :length].tolist(),
                top_probs=top_probs[row, :length].tolist(),
                finished=ids[length - 1] == eos_id,
                forced=forced[row, :length].tolist() if forced is not None else [],
            )
        )
    return generations


def cut(generation: Generation, limit: int) -> Generation:
    """The first `limit` steps of a generation (unfinished if its end-of-sequence came later)."""
    return generation if len(generation.token_ids) <= limit else generation.steps(0, limit)
