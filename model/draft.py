"""Copy-draft decoding: guess several next tokens, check them all in one forward pass, and keep
exactly what step-by-step constrained greedy would have chosen.

The guesses are cheap because the answer is mostly copied: tokens the grammar forces, then the
prompt's own tokens after the last place where the answer's recent tokens occur in it (the source
text continuing after the value so far). Verification takes, at each drafted position, the greedy
choice of the masked logits; a draft is kept while it equals that choice, and the first choice that
differs is kept too. So every forward pass yields at least one token and the output is the
step-by-step one, token for token.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from model.attention import Attend
from model.bloom import Bloom
from model.constraints import BatchConstraint, RowConstraint
from model.signals import StepSignals, step_signals

# Longest run of recent answer tokens looked up in the prompt; shorter runs are tried after.
LOOKUP_TOKENS = 3


class PromptIndex:
    """Where each token occurs in a prompt, so a lookup does not scan the prompt every step."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self.prompt = list(prompt)
        self.at: dict[int, list[int]] = {}
        for i, token in enumerate(self.prompt):
            self.at.setdefault(token, []).append(i)

    def after(self, pattern: Sequence[int], limit: int) -> list[int] | None:
        """The `limit` tokens after the last occurrence of `pattern`, or None if it does not occur."""
        n = len(pattern)
        for end in reversed(self.at.get(pattern[-1], [])):
            if end + 1 >= n and self.prompt[end + 1 - n : end + 1] == list(pattern):
                return self.prompt[end + 1 : end + 1 + limit]
        return None


def propose(row: RowConstraint | None, prompt: PromptIndex, generated: Sequence[int], limit: int) -> list[int]:
    """Up to `limit` tokens greedy may well choose after `generated`."""
    draft: list[int] = []
    if row is not None and not row.ended:
        configs = row.configs
        while len(draft) < limit and configs:
            legal = row.allowed(configs)
            if legal.numel() != 1 or int(legal) == row.eos_id:
                break
            draft.append(int(legal))
            configs = row.after(configs, draft[-1])
    tail = [*generated, *draft]
    for n in range(min(LOOKUP_TOKENS, len(tail)), 0, -1):
        following = prompt.after(tail[-n:], limit - len(draft))
        if following is not None:
            draft += following
            break
    return draft[:limit]


def decode_with_drafts(
    model: Bloom,
    attend: Attend,
    logits: torch.Tensor,
    pos: torch.Tensor,
    max_new_tokens: int,
    eos_id: int,
    top_k: int,
    ended: torch.Tensor,
    constraint: BatchConstraint | None,
    prompts: Sequence[Sequence[int]],
    draft_tokens: int,
) -> tuple[list[StepSignals], int]:
    """What `decode_n_tokens` returns, with per-step `taken` rows, and the forward passes it made."""
    rows = logits.shape[0]
    done = ended.tolist()
    generated: list[list[int]] = [[] for _ in range(rows)]
    positions = pos.tolist()
    trash = model.caches[0].k.shape[1] - 1
    steps: list[StepSignals] = []
    passes = 0
    indexes = [PromptIndex(p) for p in prompts]
    # Per row, how many tokens to draft: halved when a whole draft is rejected, doubled when one is
    # kept whole. A row whose guesses keep failing then costs a pass little more than a plain step
    # (on a CPU, the LM head over every drafted position is most of a pass).
    budget = [draft_tokens] * rows
    active = [not d for d in done]
    chosen = _take(steps, logits, active, constraint, top_k, generated, done, eos_id, max_new_tokens)
    steps[-1].drafted = torch.zeros(rows, dtype=torch.bool, device=logits.device)
    while not all(done):
        drafts = []
        for r in range(rows):
            room = max_new_tokens - len(generated[r])
            row = constraint.rows[r] if constraint is not None and r < len(constraint.rows) else None
            drafts.append([] if done[r] else propose(row, indexes[r], generated[r], min(budget[r], room)))
        width = 1 + max(len(d) for d in drafts)
        tokens = [[chosen[r], *drafts[r]] + [eos_id] * (width - 1 - len(drafts[r])) for r in range(rows)]
        q_pos = [
            [positions[r] + j if j <= len(drafts[r]) and not done[r] else trash for j in range(width)]
            for r in range(rows)
        ]
        device = logits.device
        every = model.every_logits(torch.tensor(tokens, device=device), torch.tensor(q_pos, device=device), attend)
        passes += 1
        verifying = [not d for d in done]
        for j in range(width):
            picked = _take(steps, every[:, j], verifying, constraint, top_k, generated, done, eos_id, max_new_tokens)
            kept = [verifying[r] and j < len(drafts[r]) and picked[r] == drafts[r][j] for r in range(rows)]
            steps[-1].drafted = torch.tensor(kept, device=device)
            for r in range(rows):
                if not verifying[r]:
                    continue
                if kept[r] and not done[r]:
                    continue
                verifying[r] = False
                chosen[r] = picked[r]
                positions[r] += j + 1
                budget[r] = _next_budget(budget[r], j, len(drafts[r]), draft_tokens)
            if not any(verifying):
                break
    return steps, passes


def _next_budget(budget: int, kept: int, drafted: int, most: int) -> int:
    if drafted and kept == drafted:
        return min(most, budget * 2)
    if drafted and kept == 0:
        return max(1, budget // 2)
    return budget


def _take(steps, logits, active, constraint, top_k, generated, done, eos_id, max_new_tokens) -> list[int]:
    """One greedy step for the `active` rows: masked, recorded as taken, fed to the grammar."""
    forced, unmasked = None, logits
    if constraint is not None:
        logits, forced = constraint.apply(logits, active)
    signals = step_signals(logits, top_k, unmasked)
    picked = signals.chosen.tolist()
    signals.forced = forced
    signals.taken = torch.tensor(active, device=logits.device)
    steps.append(signals)
    if constraint is not None:
        constraint.advance(signals.chosen, active)
    for r, on in enumerate(active):
        if on:
            generated[r].append(picked[r])
            done[r] = done[r] or picked[r] == eos_id or len(generated[r]) >= max_new_tokens
    return picked
