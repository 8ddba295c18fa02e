"""Teacher-forced answer log-probabilities over our BLOOM module: what the lexicon backoff
(model/answers/backoff.py) asks of the model when it makes it choose among candidates.

The backoff's pairs come a document at a time, and a document's one-label prompts differ only
after its text: consecutive pairs sharing a prefix of at least `MIN_SHARED` tokens are one group,
whose prefix is prefilled once into a one-row cache and copied into each row's; each row then reads
only its own rest (the label, the answer), `rows` at a time, and the LM head runs only at the
positions that predict an answer's tokens. transformers' forward, which this replaces, ran the head
over every position of the prefix too: a third of a small model's prefill (ops/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from model.runner.attention import Attend
from model.runner.bloom import Bloom
from model.runner.fast import LENGTH_BUCKET, bucket
from model.runner.generate import prefill

# Rows per scoring forward.
SCORE_ROWS = 16


class BloomScorer:
    """`score(pairs)`: for each (context token ids, answer token ids), the answer's summed log-probability."""

    MIN_SHARED = 16

    def __init__(self, model: Bloom, attend: Attend, heads_first: bool, rows: int = SCORE_ROWS) -> None:
        self.model = model
        self.attend = attend
        self.heads_first = heads_first
        self.rows = rows

    @torch.inference_mode()
    def __call__(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        out = [0.0] * len(pairs)
        # The module's caches as they were (empty, as model/build.py builds it): scoring's own are
        # freed once the call returns, not held until the next.
        before = self.model.caches
        try:
            for group in groups([context for context, _ in pairs], self.MIN_SHARED):
                self._score_group(pairs, group, out)
        finally:
            self.model.caches = before
        return out

    def _score_group(self, pairs, group: list[int], out: list[float]) -> None:
        device = self.model.word_embeddings.weight.device
        contexts = [pairs[i][0] for i in group]
        # Every row keeps at least one context token: the one whose logits predict its answer's first.
        shared = min(common_prefix(contexts), *(len(c) - 1 for c in contexts))
        width = max(len(pairs[i][0]) - shared + len(pairs[i][1]) for i in group)
        # Room for the prefix, the longest rest and the trash slot padding tokens write to.
        length = bucket(shared + width + 1, LENGTH_BUCKET)
        prefix = None
        if shared:
            prefix = self.model.caches = self.model.new_caches(1, length, heads_first=self.heads_first)
            tokens = torch.tensor([contexts[0][:shared]], device=device)
            start = torch.zeros(1, dtype=torch.long, device=device)
            prefill(self.model, self.attend, tokens, start, torch.tensor([shared], device=device))
        for at in range(0, len(group), self.rows):
            rows = group[at : at + self.rows]
            self.model.caches = self.model.new_caches(len(rows), length, heads_first=self.heads_first)
            if prefix is not None:
                for cache, source in zip(self.model.caches, prefix, strict=True):
                    cache.k[:, :shared] = source.k[:, :shared]
                    cache.v[:, :shared] = source.v[:, :shared]
            self._score_rows(pairs, rows, shared, length, out)

    def _score_rows(self, pairs, rows: list[int], shared: int, length: int, out: list[float]) -> None:
        """The rows' rests (label, answer) read on caches holding their shared prefix."""
        device = self.model.word_embeddings.weight.device
        rests = [pairs[i][0][shared:] + pairs[i][1] for i in rows]
        width = max(len(r) for r in rests)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        for r, rest in enumerate(rests):
            ids[r, : len(rest)] = torch.tensor(rest)
        steps = torch.arange(width)
        lengths = torch.tensor([len(r) for r in rests])
        # Padding tokens write to the last slot, which no real query reaches (as in `prefill`).
        q_pos = (shared + steps[None, :]).masked_fill(steps[None, :] >= lengths[:, None], length - 1)
        # The flat positions (row * width + step) whose logits predict each row's answer tokens.
        wanted: list[int] = []
        answers: list[int] = []
        for r, i in enumerate(rows):
            context, answer = pairs[i]
            first = len(context) - shared - 1
            wanted += [r * width + first + k for k in range(len(answer))]
            answers += answer
        at = torch.tensor(wanted, device=device)
        logits = self.model.every_logits(ids.to(device), q_pos.to(device), self.attend, at)
        picked = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(answers, device=device)[:, None])
        sums = picked.cpu()[:, 0].tolist()
        cursor = 0
        for i in rows:
            n = len(pairs[i][1])
            out[i] = sum(sums[cursor : cursor + n])
            cursor += n


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for k in range(n):
        if any(s[k] != first[k] for s in sequences):
            return k
    return n


def groups(contexts: Sequence[Sequence[int]], min_shared: int) -> list[list[int]]:
    """Runs of consecutive contexts sharing at least `min_shared` leading tokens (or all of one)."""
    found: list[list[int]] = []
    for i, context in enumerate(contexts):
        if found:
            head = contexts[found[-1][0]]
            if common_prefix([head, context]) >= min(min_shared, len(head), len(context)):
                found[-1].append(i)
                continue
        found.append([i])
    return found
