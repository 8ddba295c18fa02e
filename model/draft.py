"""Copy-draft decoding: guess several next tokens, check them all in one forward pass, and keep
exactly what step-by-step constrained greedy would have chosen.

The guesses are cheap because the answer is mostly copied or fixed: tokens the grammar forces, the
next label in the order the prompt asks for them, and inside a value the prompt's own tokens after
the last place where the answer's recent tokens occur in it (the source text continuing the value).
Verification takes, at each drafted position, the greedy choice of the masked logits; a draft is
kept while it equals that choice, and the first choice that differs is kept too. So every forward
pass yields at least one token and the output is the step-by-step one, token for token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from model.attention import Attend
from model.bloom import Bloom
from model.constraints import FEW, BatchConstraint, RowConstraint
from model.grammar import Config, Line, Value
from model.signals import StepSignals, step_signals
from model.token_bytes import VALUE_BREAKS, TokenBytes

# Longest run of recent answer tokens looked up in the prompt; shorter runs are tried after. Long
# enough to tell apart two places a short value occurs (a name in the parties and in the signature).
LOOKUP_TOKENS = 8


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
    """Up to `limit` tokens greedy may well choose after `generated`: what the grammar forces; at a
    line's start the next unanswered label in the order asked (answers follow it); inside a value,
    the prompt's tokens after the answer's last ones (the source text continuing the value), up to
    the first tab or newline, after which the grammar guesses again. A guess the grammar forbids
    ends the draft: constrained greedy never takes it."""
    if row is None or row.ended:
        return copied(prompt, generated, limit)
    draft: list[int] = []
    configs = row.configs
    while len(draft) < limit and configs:
        guess = grammar_guess(row, configs)
        if guess is None:
            break
        if not guess and any(isinstance(c, Value) for c in configs):
            guess = copied(prompt, [*generated, *draft], limit - len(draft))
            breaks = [i for i, t in enumerate(guess) if VALUE_BREAKS.intersection(row.vocab.by_id[t] or b"")]
            guess = guess[: breaks[0] + 1] if breaks else guess
        if not guess:
            break  # a value starts here: the model picks which, a lookup would only guess
        for token in guess[: limit - len(draft)]:
            configs = row.after(configs, token)
            if not configs:
                return draft
            draft.append(token)
    return draft


def grammar_guess(row: RowConstraint, configs: frozenset[Config]) -> list[int] | None:
    """The tokens the grammar forces or suggests next; None where it forces the end."""
    legal = row.allowed(configs)
    if legal.numel() <= FEW:
        spellings = {row.vocab.by_id[t] if t != row.eos_id else None for t in legal.tolist()}
        if spellings == {None}:
            return None
        if len(spellings) == 1:
            # One legal text, maybe under several ids (a byte-fallback twin): the tokenizer's own.
            return [row.vocab.ids[spellings.pop()][0]]
    return next_label(row, configs)


def copied(prompt: PromptIndex, tail: Sequence[int], limit: int) -> list[int]:
    """The prompt's tokens after the longest run of `tail`'s last tokens that occurs in it."""
    for n in range(min(LOOKUP_TOKENS, len(tail)), 0, -1):
        following = prompt.after(tail[-n:], limit)
        if following is not None:
            return following
    return []


def next_label(row: RowConstraint, configs: frozenset[Config]) -> list[int]:
    """At a line's head, the rest of the first unanswered label (and its `: `) that it may still
    spell, in tokens (longest first: the spelling a tokenizer gives); empty where that is not a guess."""
    line = next(iter(configs))
    if len(configs) != 1 or not isinstance(line, Line):
        return []
    for i, head in enumerate(row.grammar.heads):
        if not line.answered >> i & 1 and head.startswith(line.prefix):
            return spell(row.vocab, head[len(line.prefix) :])
    return []


def spell(vocab: TokenBytes, data: bytes) -> list[int]:
    """`data` as tokens, each the longest token its remaining bytes start with; empty if some byte
    has no token."""
    tokens: list[int] = []
    while data:
        for size in range(len(data), 0, -1):
            ids = vocab.ids.get(data[:size])
            if ids:
                tokens.append(ids[0])
                data = data[size:]
                break
        else:
            return []
    return tokens


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
) -> tuple[list[StepSignals], int, list[int]]:
    """What `decode_n_tokens` returns, with per-step `taken` rows; the forward passes it made, and
    per row the passes it was decoded in (fewer than the batch's where other rows take longer)."""
    rows = logits.shape[0]
    done = ended.tolist()
    generated: list[list[int]] = [[] for _ in range(rows)]
    positions = pos.tolist()
    trash = model.caches[0].k.shape[1] - 1
    steps: list[StepSignals] = []
    passes = 0
    row_passes = [0] * rows
    indexes = [PromptIndex(p) for p in prompts]
    # Per row, how many tokens to draft: halved when a whole draft is rejected, doubled when one is
    # kept whole. A row whose guesses keep failing then costs a pass little more than a plain step
    # (on a CPU, the LM head over every drafted position is most of a pass).
    budget = [draft_tokens] * rows
    first = _rows(done)
    part = logits[torch.tensor(first, dtype=torch.long, device=logits.device)]
    chosen = _take(steps, part, first, rows, constraint, top_k, generated, done, eos_id, max_new_tokens)
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
        # Where row r's step j sits among the positions whose logits are computed.
        verifying = _rows(done)
        flat = [r * width + j for r in verifying for j in range(1 + len(drafts[r]))]
        offset, n = {}, 0
        for r in verifying:
            offset[r], n = n, n + 1 + len(drafts[r])
        device = logits.device
        tensors = [torch.tensor(t, device=device) for t in (tokens, q_pos, flat)]
        every = model.every_logits(tensors[0], tensors[1], attend, tensors[2])
        passes += 1
        for r in verifying:
            row_passes[r] += 1
        for j in range(width):
            part = every[torch.tensor([offset[r] + j for r in verifying], device=device)]
            picked = _take(steps, part, verifying, rows, constraint, top_k, generated, done, eos_id, max_new_tokens)
            kept = [r for r in verifying if j < len(drafts[r]) and picked[r] == drafts[r][j]]
            steps[-1].drafted = torch.tensor([r in kept for r in range(rows)], device=device)
            for r in verifying:
                if r in kept and not done[r]:
                    continue
                chosen[r] = picked[r]
                positions[r] += j + 1
                budget[r] = _next_budget(budget[r], j, len(drafts[r]), draft_tokens)
            verifying = [r for r in kept if not done[r]]
            if not verifying:
                break
    return steps, passes, row_passes


def _rows(done: list[bool]) -> list[int]:
    return [r for r, d in enumerate(done) if not d]


def _next_budget(budget: int, kept: int, drafted: int, most: int) -> int:
    if drafted and kept == drafted:
        return min(most, budget * 2)
    if drafted and kept == 0:
        return max(1, budget // 2)
    return budget


def _take(steps, logits, which, rows, constraint, top_k, generated, done, eos_id, max_new_tokens) -> list[int]:
    """One greedy step for the batch rows `which` (`logits` holds theirs, in that order): masked,
    recorded as taken, fed to the grammar. Past a draft's first position few rows still verify,
    and each row's signals are passes over the whole vocabulary."""
    forced, masked = None, logits
    if constraint is not None:
        masked, forced = constraint.apply(logits, which)
    signals = step_signals(masked, top_k, logits)
    signals.forced = forced
    if constraint is not None:
        constraint.advance(signals.chosen, which)
    signals = _widen(signals, which, rows)
    taken = set(which)
    signals.taken = torch.tensor([r in taken for r in range(rows)], device=logits.device)
    steps.append(signals)
    picked = signals.chosen.tolist()
    for r in which:
        generated[r].append(picked[r])
        done[r] = done[r] or picked[r] == eos_id or len(generated[r]) >= max_new_tokens
    return picked


def _widen(part: StepSignals, which: list[int], rows: int) -> StepSignals:
    """Signals of the rows `which`, placed in a batch of `rows` (the others zero: not taken)."""
    index = torch.tensor(which, dtype=torch.long, device=part.chosen.device)

    def widen(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None:
            return None
        return torch.zeros((rows, *t.shape[1:]), dtype=t.dtype, device=t.device).index_copy_(0, index, t)

    return StepSignals(**{f.name: widen(getattr(part, f.name)) for f in dataclasses.fields(StepSignals)})
