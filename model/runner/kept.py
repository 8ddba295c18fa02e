"""The KV of prompts a runner prefilled, kept for the lexicon backoff's scoring.

The backoff (model/answers/backoff.py) scores candidates after a one-label prompt whose text line is
the one the decode loop prefilled a moment before (`输入: {text}\\n抽取: `, model/answers/prompt.py).
The runner keeps each prompt's KV here, the newest `budget` tokens' worth, and the scorer
(model/runner/score.py) copies the longest stored prefix of its prompt instead of prefilling it
again. A key's KV does not depend on what follows it or on the rows it was prefilled beside (the
runner's tests hold a row to that, bit for bit), so the scores are the same.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch
from torch import nn

# Stored prompts are found by their first tokens: a one-label prompt shares at least these with the
# prompt its document was decoded with (the scorer asks for no shorter prefix: `BloomScorer.MIN_SHARED`).
LOOKUP_TOKENS = 16


class KeptPrompts:
    """Prompts' per-layer keys and values, oldest dropped first beyond `budget` tokens."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.tokens = 0
        self._kv: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()
        self._by_head: dict[tuple[int, ...], set[tuple[int, ...]]] = {}

    def keep(self, prompts: Sequence[Sequence[int]], caches: nn.ModuleList) -> None:
        """Copy out row r's KV for `prompts[r]`, all its positions (rows past the prompts: padding)."""
        for row, prompt in enumerate(prompts):
            key = tuple(prompt)
            if key in self._kv:
                self._kv.move_to_end(key)
                continue
            if len(key) > self.budget:
                continue
            self._kv[key] = [(c.k[row, : len(key)].clone(), c.v[row, : len(key)].clone()) for c in caches]
            self._by_head.setdefault(key[:LOOKUP_TOKENS], set()).add(key)
            self.tokens += len(key)
            while self.tokens > self.budget:
                self._drop(next(iter(self._kv)))

    def longest(self, tokens: Sequence[int]) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """The stored prompt sharing the most leading tokens with `tokens` (at least LOOKUP_TOKENS):
        how many, and its KV; (0, None) where none does."""
        best, found = 0, None
        for key in self._by_head.get(tuple(tokens[:LOOKUP_TOKENS]), ()):
            n = common_prefix([key, tokens])
            if n > best:
                best, found = n, self._kv[key]
        return best, found

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._kv[key]
        self.tokens -= len(key)
        same_head = self._by_head[key[:LOOKUP_TOKENS]]
        same_head.discard(key)
        if not same_head:
            del self._by_head[key[:LOOKUP_TOKENS]]


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every one of `sequences` shares."""
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for k in range(n):
        if any(s[k] != first[k] for s in sequences):
            return k
    return n
