"""Greedy decoding over our BLOOM module, in gpt-fast's shape: prefill, decode_one_token,
decode_n_tokens, and decode_with_drafts beside it. The engine strings them together.

decode_n_tokens owns the step's order (the grammar's mask, signals and choice, the grammar advanced,
the model's step) and keeps it on the device; its grammar is a Grammar (model/grammar/protocol.py).
decode_with_drafts steps the host grammar through `greedy_step`, as its proposer reads that grammar.

Copy drafts (proposals in model/grammar/draft.py): verification takes, at each drafted position, the
greedy choice of the masked logits; a draft is kept while it equals that choice, and the first choice
that differs is kept too. So every forward pass yields at least one token and the output is the
step-by-step one, token for token.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from model.grammar.draft import PromptIndex, propose
from model.grammar.mask import GrammarBatch
from model.grammar.protocol import Grammar
from model.runner.attention import Attend
from model.runner.bloom import Bloom
from model.signals import SignalTensors, StepSignals, signal_tensors

DecodeStep = Callable[[Bloom, torch.Tensor, torch.Tensor], torch.Tensor]
Signals = Callable[[torch.Tensor, torch.Tensor | None, int], SignalTensors]


@dataclass
class Decoding:
    """What both decoders take besides a batch's prefill logits and positions: the model and its
    compiled (or not) step and signals, the grammar, and the limits."""

    model: Bloom
    attend: Attend
    step: DecodeStep
    eos_id: int
    top_k: int
    max_new_tokens: int
    constraint: GrammarBatch | None = None  # the copy drafts' (host) grammar
    signals: Signals = signal_tensors
    grammar: Grammar | None = None  # the stepwise loop's


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


def greedy_step(decoding: Decoding, logits: torch.Tensor, which: Sequence[int] | None = None) -> StepSignals:
    """One greedy step for the batch rows `which` (all by default; `logits` holds theirs, in that
    order): the grammar's legal tokens, the signals, and the grammar fed the chosen tokens. The
    signals are those of the masked distribution, apart from the entropy, which is the full one's."""
    constraint = decoding.constraint
    legal = forced = None
    if constraint is not None:
        legal, forced = constraint.legal(logits, which)
    signals = StepSignals(*decoding.signals(logits, legal, decoding.top_k), forced=forced)
    if constraint is not None:
        constraint.advance(signals.chosen, which)
    return signals


# On an accelerator the host asks whether every row has ended only this often: each question waits
# for the device. On a CPU there is nothing to wait for, and each step past the end is a wasted pass.
END_CHECK_STEPS = 8


@dataclass
class Decoded:
    """A stepwise decode's signals, on the host; its forward passes after the prefill, and its time."""

    steps: list[StepSignals]
    passes: int
    seconds: float


def decode_n_tokens(
    decoding: Decoding,
    logits: torch.Tensor,
    pos: torch.Tensor,
    ended: torch.Tensor,
    observe: Callable[[torch.Tensor], None] | None = None,
) -> Decoded:
    """Greedy continuation from the prefill logits until every row has ended or the limit is hit.

    Each step in one order, all on the device: the grammar's legal tokens, the signals and the
    choice, the grammar advanced, the outputs written into buffers preallocated for every step, the
    model's next step. The host waits for the device only every END_CHECK_STEPS steps (has every
    row ended?; every step on a CPU) and once at the end, when the buffers come over in one transfer. Steps taken after
    every row ended are cut by the collection, which ends each row at its end-of-sequence.

    `ended` [B] starts True for rows that only pad a batch to its compiled shape. `observe`, if
    given, sees each step's full logits (equivalence tests compare them with transformers'), before
    the grammar, if any, masks them.
    """
    started = time.perf_counter()
    grammar = decoding.grammar
    state = grammar.start() if grammar is not None else None
    ended = ended.clone()
    buffers: list[torch.Tensor] = []
    taken = decoding.max_new_tokens
    check_every = 1 if logits.device.type == "cpu" else END_CHECK_STEPS
    for i in range(decoding.max_new_tokens):
        if observe is not None:
            observe(logits)
        legal = forced = None
        if grammar is not None:
            legal, forced = grammar.legal(state)
        outputs = (*decoding.signals(logits, legal, decoding.top_k), *(() if forced is None else (forced,)))
        if not buffers:
            buffers = [t.new_empty((decoding.max_new_tokens, *t.shape)) for t in outputs]
        for buffer, t in zip(buffers, outputs, strict=True):
            buffer[i] = t
        chosen = outputs[0]
        if grammar is not None:
            state = grammar.advance(state, chosen)
        ended |= chosen == decoding.eos_id
        if (i + 1) % check_every == 0 and bool(ended.all()):
            taken = i + 1
            break
        if i < decoding.max_new_tokens - 1:
            logits = decoding.step(decoding.model, chosen, pos + i)
    host = [b[:taken].cpu() for b in buffers]
    steps = [StepSignals(*(h[i] for h in host[:5]), forced=host[5][i] if len(host) > 5 else None) for i in range(taken)]
    return Decoded(steps, taken - 1, time.perf_counter() - started)


def decode_with_drafts(
    decoding: Decoding,
    logits: torch.Tensor,
    pos: torch.Tensor,
    ended: torch.Tensor,
    prompts: Sequence[Sequence[int]],
    draft_tokens: int,
) -> tuple[list[StepSignals], int, list[int]]:
    """What `decode_n_tokens` returns, with per-step `taken` rows; the forward passes it made, and
    per row the passes it was decoded in (fewer than the batch's where other rows take longer)."""
    model, constraint, eos_id = decoding.model, decoding.constraint, decoding.eos_id
    max_new_tokens = decoding.max_new_tokens
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
    chosen = _take(decoding, steps, part, first, generated, done)
    steps[-1].drafted = torch.zeros(rows, dtype=torch.bool, device=logits.device)
    while not all(done):
        limits = [0 if done[r] else min(budget[r], max_new_tokens - len(generated[r])) for r in range(rows)]
        drafts = propose(constraint, indexes, generated, limits)
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
        every = model.every_logits(tensors[0], tensors[1], decoding.attend, tensors[2])
        passes += 1
        for r in verifying:
            row_passes[r] += 1
        for j in range(width):
            part = every[torch.tensor([offset[r] + j for r in verifying], device=device)]
            picked = _take(decoding, steps, part, verifying, generated, done)
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


def _take(
    decoding: Decoding,
    steps: list[StepSignals],
    logits: torch.Tensor,
    which: list[int],
    generated: list[list[int]],
    done: list[bool],
) -> list[int]:
    """One greedy step for the batch rows `which`, recorded as taken. Past a draft's first position few
    rows still verify, and each row's signals are passes over the whole vocabulary."""
    rows = len(done)
    signals = _widen(greedy_step(decoding, logits, which), which, rows)
    taken = set(which)
    signals.taken = torch.tensor([r in taken for r in range(rows)], device=logits.device)
    steps.append(signals)
    picked = signals.chosen.tolist()
    for r in which:
        generated[r].append(picked[r])
        done[r] = done[r] or picked[r] == decoding.eos_id or len(generated[r]) >= decoding.max_new_tokens
    return picked


def _widen(part: StepSignals, which: list[int], rows: int) -> StepSignals:
    """Signals of the rows `which`, placed in a batch of `rows` (the others zero: not taken)."""
    index = torch.tensor(which, dtype=torch.long, device=part.chosen.device)

    def widen(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None:
            return None
        return torch.zeros((rows, *t.shape[1:]), dtype=t.dtype, device=t.device).index_copy_(0, index, t)

    return StepSignals(**{f.name: widen(getattr(part, f.name)) for f in dataclasses.fields(StepSignals)})
