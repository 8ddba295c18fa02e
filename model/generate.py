"""Greedy decoding over our BLOOM module, in gpt-fast's shape: prefill, decode_one_token,
decode_n_tokens. Every function is plain tensors in, tensors out; the engine strings them together.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from model.attention import Attend
from model.bloom import Bloom
from model.constraints import BatchConstraint
from model.signals import StepSignals, step_signals

DecodeStep = Callable[[Bloom, torch.Tensor, torch.Tensor], torch.Tensor]


def prefill(
    model: Bloom,
    attend: Attend,
    tokens: torch.Tensor,
    start: torch.Tensor,
    lengths: torch.Tensor,
) -> torch.Tensor:
    """Run the new tokens [B, S] (row b's real ones are the first lengths[b], placed from cache
    position start[b]); returns the logits [B, V] after each row's last real token.

    Padding tokens all write to the cache's last slot, which no real query reaches: rows of any
    lengths and starts share one call without writing past the cache or over each other.
    """
    steps = torch.arange(tokens.shape[1], device=tokens.device)
    trash = model.caches[0].k.shape[1] - 1
    q_pos = (start[:, None] + steps).masked_fill(steps >= lengths[:, None], trash)
    return model(tokens, q_pos, attend, last=lengths - 1)


def make_decode_one_token(attend: Attend) -> DecodeStep:
    def decode_one_token(model: Bloom, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """One greedy step: the token [B] just chosen enters the cache at position pos [B]."""
        return model(token[:, None], pos[:, None], attend)

    return decode_one_token


def decode_n_tokens(
    model: Bloom,
    step: DecodeStep,
    logits: torch.Tensor,
    pos: torch.Tensor,
    max_new_tokens: int,
    eos_id: int,
    top_k: int,
    ended: torch.Tensor,
    observe: Callable[[torch.Tensor], None] | None = None,
    constraint: BatchConstraint | None = None,
) -> list[StepSignals]:
    """Greedy continuation from the prefill logits until every row has ended or the limit is hit.

    `ended` [B] starts True for rows that only pad a batch to its compiled shape. `observe`, if
    given, sees each step's full logits (equivalence tests compare them with transformers'), before
    the constraint, if any, masks them; the signals are those of the masked distribution, apart from
    the entropy, which is the full one's.
    """
    steps: list[StepSignals] = []
    ended = ended.clone()
    for i in range(max_new_tokens):
        if observe is not None:
            observe(logits)
        forced, unmasked = None, logits
        if constraint is not None:
            logits, forced = constraint.apply(logits)
        signals = step_signals(logits, top_k, unmasked)
        signals.forced = forced
        if constraint is not None:
            constraint.advance(signals.chosen)
        steps.append(signals)
        ended |= signals.chosen == eos_id
        if i == max_new_tokens - 1 or bool(ended.all()):
            break
        logits = step(model, signals.chosen, pos + i)
    return steps
