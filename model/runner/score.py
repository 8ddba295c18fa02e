"""Teacher-forced answer log-probabilities over our BLOOM module: what the lexicon backoff
(model/answers/backoff.py) asks of the model when it makes it choose among candidates.

The backoff's pairs come a document at a time, and a document's one-label prompts differ only
after its text: consecutive pairs sharing a prefix of at least `MIN_SHARED` tokens are one group,
whose prefix is prefilled once. Groups go `rows` at a time, shortest prefix first, their prefixes
prefilled together in the calls that pad least (`prefill_ranges`); then their pairs, `rows` at a
time across groups, each read its own rest (the label, the answer) on a copy of its prefix, and the
LM head runs only at the positions that predict an answer's tokens. transformers' forward, which
this replaced, ran the head over every position of the prefix too (ops/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from model.runner.attention import Attend
from model.runner.bloom import MIN_GEMM_ROWS, Bloom
from model.runner.fast import LENGTH_BUCKET, bucket, prefill_ranges
from model.runner.generate import prefill

# Rows per scoring forward.
SCORE_ROWS = 16


class BloomScorer:
    """`score(pairs)`: for each (context token ids, answer token ids), the answer's summed log-probability."""

    MIN_SHARED = 16

    def __init__(
        self, model: Bloom, attend: Attend, heads_first: bool, rows: int = SCORE_ROWS, call_tokens: int = 0
    ) -> None:
        """`call_tokens`: a prefill call's fixed cost in tokens' worth (`prefill_ranges`), as the runner's."""
        self.model = model
        self.attend = attend
        self.heads_first = heads_first
        self.rows = rows
        self.call_tokens = call_tokens

    @torch.inference_mode()
    def __call__(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        out = [0.0] * len(pairs)
        found = groups([context for context, _ in pairs], self.MIN_SHARED)
        # Every row keeps at least one context token: the one whose logits predict its answer's first.
        shared = [min(common_prefix([pairs[i][0] for i in g]), *(len(pairs[i][0]) - 1 for i in g)) for g in found]
        # The module's caches as they were (empty, as model/build.py builds it): scoring's own are
        # freed once the call returns, not held until the next.
        before = self.model.caches
        try:
            # `rows` documents' prefixes at a time, their pairs `rows` at a time: a few batched
            # forwards for a batch's candidates, where one forward per document and per chunk of its
            # candidates made a batch's scoring as many small calls as documents backed off.
            # Documents of similar length together: a call pads to, and its rows read as far as, its longest.
            by_length = sorted(range(len(found)), key=lambda g: shared[g])
            for at in range(0, len(found), self.rows):
                batch = by_length[at : at + self.rows]
                prefixes = self._prefill_prefixes(pairs, [found[g] for g in batch], [shared[g] for g in batch])
                rows = [(b, i) for b, g in enumerate(batch) for i in found[g]]
                reach = [shared[g] for g in batch for _ in found[g]]
                for start in range(0, len(rows), self.rows):
                    end = start + self.rows
                    self._score_rows(pairs, rows[start:end], reach[start:end], prefixes, out)
        finally:
            self.model.caches = before
        return out

    def _prefill_prefixes(self, pairs, found: list[list[int]], shared: list[int]) -> nn.ModuleList:
        """Caches whose row b holds group b's shared prefix; the groups come shortest prefix first, so
        each call's rows are consecutive (a group whose prefix is empty, a one-token context, reads
        another's row and writes over it)."""
        device = self.model.word_embeddings.weight.device
        caches = self.model.new_caches(len(found), bucket(max(shared) + 1, LENGTH_BUCKET), heads_first=self.heads_first)
        for lo, hi in prefill_ranges(shared, self.call_tokens):
            if not shared[hi - 1]:
                continue
            tokens = torch.zeros((hi - lo, max(MIN_GEMM_ROWS, shared[hi - 1])), dtype=torch.long)
            for b in range(lo, hi):
                tokens[b - lo, : shared[b]] = torch.tensor(pairs[found[b][0]][0][: shared[b]])
            self.model.caches = nn.ModuleList(c.view(hi - lo, c.k.shape[1], start=lo) for c in caches)
            prefill(
                self.model,
                self.attend,
                tokens.to(device),
                torch.zeros(hi - lo, dtype=torch.long, device=device),
                torch.tensor(shared[lo:hi], device=device),
            )
        return caches

    def _score_rows(
        self, pairs, rows: list[tuple[int, int]], shared: list[int], prefixes: nn.ModuleList, out: list[float]
    ) -> None:
        """The rows' rests (label, answer), each read on a copy of its prefix (`rows`: (its row in
        `prefixes`, its pair))."""
        device = self.model.word_embeddings.weight.device
        rests = [pairs[i][0][s:] + pairs[i][1] for (_, i), s in zip(rows, shared, strict=True)]
        # At least MIN_GEMM_ROWS columns, as the runner's prefill: a row's numbers then do not depend
        # on how many rows share the call (model/runner/bloom.py).
        width = max(MIN_GEMM_ROWS, *(len(r) for r in rests))
        # Room for the longest prefix and rest, and the trash slot padding tokens write to.
        length = bucket(max(s + len(r) for s, r in zip(shared, rests, strict=True)) + 1, LENGTH_BUCKET)
        self.model.caches = self.model.new_caches(len(rows), length, heads_first=self.heads_first)
        reach = max(shared)
        source = torch.tensor([b for b, _ in rows], device=device)
        for cache, prefix in zip(self.model.caches, prefixes, strict=True):
            cache.k[:, :reach] = prefix.k[source, :reach]
            cache.v[:, :reach] = prefix.v[source, :reach]
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        for r, rest in enumerate(rests):
            ids[r, : len(rest)] = torch.tensor(rest)
        steps = torch.arange(width)
        lengths = torch.tensor([len(r) for r in rests])
        # Padding tokens write to the last slot, which no real query reaches (as in `prefill`).
        q_pos = (torch.tensor(shared)[:, None] + steps).masked_fill(steps >= lengths[:, None], length - 1)
        # The flat positions (row * width + step) whose logits predict each row's answer tokens.
        wanted: list[int] = []
        answers: list[int] = []
        for r, ((_, i), s) in enumerate(zip(rows, shared, strict=True)):
            context, answer = pairs[i]
            first = len(context) - s - 1
            wanted += [r * width + first + k for k in range(len(answer))]
            answers += answer
        at = torch.tensor(wanted, device=device)
        logits = self.model.every_logits(ids.to(device), q_pos.to(device), self.attend, at)
        picked = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(answers, device=device)[:, None])
        sums = picked.cpu()[:, 0].tolist()
        cursor = 0
        for _, i in rows:
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
