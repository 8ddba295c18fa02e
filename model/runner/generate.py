"""Greedy decoding over our BLOOM module, in gpt-fast's shape: prefill, decode_one_token and
decode_n_tokens. The engine strings them together.

decode_n_tokens owns the step's order (the grammar's mask, signals and choice, the grammar advanced,
the model's step) and keeps it on the device; its grammar is any Grammar (model/grammar/protocol.py).

Copy drafts (several tokens verified per pass) were tried here and removed: on the CPU with the demo
model they were 1.3-1.4x faster, but a verify pass's matrix products take shapes set by the batch
mates' drafts, so confidences moved by ~1e-6 with them and records were not identical
(ops/BENCHMARKS.md, 2026-12-05).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from model.grammar.protocol import Grammar
from model.runner.attention import Attend
from model.runner.bloom import Bloom
from model.signals import SignalTensors, StepSignals, signal_tensors

DecodeStep = Callable[[Bloom, torch.Tensor, torch.Tensor], torch.Tensor]
Signals = Callable[[torch.Tensor, torch.Tensor | None, int], SignalTensors]
# (rows still going, rows ended: indices into the model's cache rows) -> the rows the model steps from
# now on, in their new cache order, their KV moved there; or None where it keeps stepping them all.
Shrink = Callable[[torch.Tensor, torch.Tensor], torch.Tensor | None]


@dataclass
class Decoding:
    """What the decoder takes besides a batch's prefill logits and positions: the model and its
    compiled (or not) step and signals, the grammar (None: free), and the limits."""

    model: Bloom
    attend: Attend
    step: DecodeStep
    eos_id: int
    top_k: int
    max_new_tokens: int
    signals: Signals = signal_tensors
    grammar: Grammar | None = None
    # [V] bool: the tokens that end a value, where a value-only row ends (model/runner/protocol.py).
    breaking: torch.Tensor | None = None
    # Where given, rows that ended stop costing the model's step once a smaller cache holds the rest.
    shrink: Shrink | None = None


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
    value_only: torch.Tensor | None = None,
) -> Decoded:
    """Greedy continuation from the prefill logits until every row has ended or the limit is hit.

    Each step in one order, all on the device: the grammar's legal tokens, the signals and the
    choice, the grammar advanced, the outputs written into buffers preallocated for every step, the
    model's next step. The host waits for the device only every END_CHECK_STEPS steps (has every
    row ended?; every step on a CPU) and once at the end, when the buffers come over in one
    transfer. Steps taken after every row ended are cut by the collection, which ends each row at
    its end-of-sequence (a value-only row at its value's break).

    `ended` [B] starts True for rows that only pad a batch to its compiled shape; a row marked in
    `value_only` [B] ends at its first token of `decoding.breaking` too. `observe`, if
    given, sees each step's full logits (equivalence tests compare them with transformers'), before
    the grammar, if any, masks them.

    At each check, `decoding.shrink` may move the rows still going to a smaller cache: the model then
    steps only those (and what pads them to a batch), and the rows that ended keep their last logits,
    whose tokens the collection cuts. A row's numbers do not depend on its batch mates, so its tokens
    and signals are the same (tests/test_fast_engine.py).
    """
    started = time.perf_counter()
    grammar = decoding.grammar
    state = grammar.start() if grammar is not None else None
    ended = ended.clone()
    buffers: list[torch.Tensor] = []
    taken = decoding.max_new_tokens
    check_every = 1 if logits.device.type == "cpu" else END_CHECK_STEPS
    stepping: torch.Tensor | None = None  # the batch's rows the model steps, where not all of them
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
        if value_only is not None and decoding.breaking is not None:
            ended |= value_only & decoding.breaking[chosen]
        if (i + 1) % check_every == 0:
            if bool(ended.all()):
                taken = i + 1
                break
            if decoding.shrink is not None and observe is None:
                stepping = _shrunk(decoding.shrink, ended, stepping)
        if i < decoding.max_new_tokens - 1:
            if stepping is None:
                logits = decoding.step(decoding.model, chosen, pos + i)
            else:
                stepped = decoding.step(decoding.model, chosen[stepping], pos[stepping] + i)
                logits = logits.index_copy(0, stepping, stepped)
    host = [b[:taken].cpu() for b in buffers]
    steps = [StepSignals(*(h[i] for h in host[:5]), forced=host[5][i] if len(host) > 5 else None) for i in range(taken)]
    return Decoded(steps, taken - 1, time.perf_counter() - started)


def _shrunk(shrink: Shrink, ended: torch.Tensor, stepping: torch.Tensor | None) -> torch.Tensor | None:
    """The batch's rows the model steps after `shrink` was offered the ended ones to drop."""
    rows = torch.arange(len(ended), device=ended.device) if stepping is None else stepping
    done = ended[rows]
    kept = shrink(torch.nonzero(~done)[:, 0], torch.nonzero(done)[:, 0])
    return stepping if kept is None else rows[kept]
