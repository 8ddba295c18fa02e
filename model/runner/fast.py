"""The fast runner: our BLOOM modules, static KV caches per (batch, length) bucket, a compiled
decode step, and each document's shared prompt prefix computed once for all its label chunks. A
group's rows are prefilled in the calls that pad least, and leave the decode step's batch once they
end (moved to a smaller bucket's caches).

It returns the same `Generation`s as the reference runner (tests hold it to that, token for token).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from model.clock import ms_since
from model.config import EngineSettings, decode_settings
from model.grammar.constrainer import new_constrainer
from model.runner.attention import make_attention, pick_backend
from model.runner.bloom import MIN_GEMM_ROWS, Bloom
from model.runner.generate import Decoding, decode_n_tokens, make_decode_one_token, prefill
from model.runner.loading import LoadedModel
from model.runner.protocol import Generated, Passes, Request
from model.runner.quantize import check_quantize, quantize_linears
from model.signals import Generation, collect_generations, cut, signal_tensors
from schemas.messages import ModelInfo

LENGTH_BUCKET = 64
# A shared prefix shorter than this is not worth a separate prefill and a cache copy.
MIN_SHARED_PREFIX = 8
# What one more prefill call costs, in tokens prefilled (see `prefill_ranges`), on the CPU.
PREFILL_CALL_TOKENS = 64


@dataclass
class DocPrompts:
    """One document's requests, decoded in one group: the flow's `Request`s as they came, with the
    tokens at the start of every prompt that are computed once for all of them (`shared`)."""

    index: int
    requests: list[Request]
    shared: int = 0

    @functools.cached_property
    def prompts(self) -> list[list[int]]:
        """Each request's prompt and kept prefix: the tokens its row is prefilled with."""
        return [r.prompt + r.prefix for r in self.requests]


def shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common token prefix of several prompts, leaving each at least one token."""
    if len(prompts) < 2:
        return 0
    limit = min(len(p) for p in prompts) - 1
    # Every prompt shares what the first and last of them in order share: two lists compared, not all.
    first, last = min(prompts), max(prompts)
    length = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), limit)
    length = min(length, limit)
    return length if length >= MIN_SHARED_PREFIX else 0


def prefill_ranges(lengths: Sequence[int], call_tokens: int) -> list[tuple[int, int]]:
    """Consecutive ranges of rows, one prefill call each, whose padded cost is least: a call pads its
    rows to its longest, and costs `call_tokens` tokens' worth more (its fixed work). A group's
    documents come shortest first (`FastRunner.plan`), yet one call for all of them computed 38-43%
    padding on the hand-written corpora with the demo model (ops/BENCHMARKS.md). A row's numbers do
    not depend on its call's other rows (tests/test_fast_engine.py), so any split gives the same output."""
    n = len(lengths)
    cost = [0] * (n + 1)  # cost[j]: least cost of rows [0, j)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest, best = 0, None
        for i in range(j - 1, -1, -1):
            longest = max(longest, lengths[i], MIN_GEMM_ROWS)
            total = cost[i] + (j - i) * longest + call_tokens
            if best is None or total < best:
                best, cut[j] = total, i
        cost[j] = best
    ranges, j = [], n
    while j > 0:
        ranges.append((cut[j], j))
        j = cut[j]
    return ranges[::-1]


def prefill_call_tokens(device: torch.device) -> int:
    """A prefill call's fixed work, in tokens' worth (`prefill_ranges`): on the CPU a forward's own
    cost is about 40 tokens' of the demo model's; on an accelerator the launches of a large model's
    forward are worth a thousand tokens or so (estimated, not measured): it splits only a wide spread."""
    return PREFILL_CALL_TOKENS if device.type == "cpu" else 16 * PREFILL_CALL_TOKENS


def bucket(n: int, step: int) -> int:
    return max(step, -(-n // step) * step)


def batch_bucket(n: int) -> int:
    return 1 << (n - 1).bit_length()


class FastRunner:
    def __init__(
        self,
        loaded: LoadedModel,
        settings: EngineSettings,
        *,
        backend: str | None = None,
        compile_decode: bool | None = None,
        prefix_sharing: bool | None = None,
    ) -> None:
        self.tokenizer = loaded.tokenizer
        self.settings = settings
        self.eos_id = int(loaded.tokenizer.eos_token_id)
        self.pad_id = int(loaded.tokenizer.pad_token_id)
        self.device = loaded.device
        self.constrainer = new_constrainer(loaded.tokenizer, loaded.device)
        check_quantize(settings.quantize, self.device)
        self.model = quantize_linears(Bloom.from_transformers(loaded.model), settings.quantize, self.device)
        self.backend = pick_backend(self.device, backend or settings.attention)
        self.attend = make_attention(self.backend)
        # flash-attn's kvcache kernel reads its own layout; every other backend reads heads first.
        self.heads_first = self.backend != "flash"
        self.prefix_sharing = settings.prefix_sharing if prefix_sharing is None else prefix_sharing
        if compile_decode is None:
            compile_decode = settings.compile == "on" or (settings.compile == "auto" and self.device.type == "cuda")
        self.compiled = compile_decode
        self.signals = signal_tensors
        breaking = torch.zeros(self.model.shape.vocab_size, dtype=torch.bool)
        breaking[[i for i in self.constrainer.tokens.breaking if i < len(breaking)]] = True
        self.breaking = breaking.to(self.device)
        step = make_decode_one_token(self.attend)
        if self.compiled:
            # One graph per (batch, length) bucket; CUDA graphs remove the per-step launch overhead.
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            # bitsandbytes' layers may break a graph (their outlier handling in int8): compiled in parts.
            step = torch.compile(step, mode=mode, fullgraph=settings.quantize == "none")
            # Mask and signals in a few fused kernels, one graph for any number of rows.
            self.signals = torch.compile(signal_tensors, dynamic=True)
        self.decode_step = step
        self.call_tokens = prefill_call_tokens(self.device)
        # Per pool ("rows" for prompts, "prefix" for shared prefixes): full-length buffers per batch
        # bucket, and the (batch, length) views handed to the model.
        self._buffers: dict[tuple[str, int], nn.ModuleList] = {}
        self._views: dict[tuple[str, int, int], nn.ModuleList] = {}
        self.max_len = bucket(settings.max_input_tokens + settings.max_new_tokens + 1, LENGTH_BUCKET)
        weights = str(loaded.dtype).removeprefix("torch.")
        # Quantized blocks say so in every record: theirs are not the unquantized model's records.
        weights += "" if settings.quantize == "none" else f"+{settings.quantize}"
        self.info = ModelInfo(
            name=loaded.name,
            engine="fast",
            attention=self.backend + ("+compiled" if self.compiled else ""),
            dtype=weights,
            device=str(self.device),
            demo=loaded.demo,
            decode=decode_settings(settings),
        )

    def generate(self, requests: Sequence[Request]) -> Generated:
        """Greedy generations, in the requests' order: the requests of a document together, documents
        of similar length in one batch (`plan`), each generation cut to its request's limit."""
        limits = [self.settings.max_new_tokens if r.max_new_tokens is None else r.max_new_tokens for r in requests]
        per_doc: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            per_doc.setdefault(request.doc, []).append(i)
        docs = list(per_doc.values())
        out: list[Generation] = [Generation()] * len(requests)
        spent = Generated()
        per_doc_requests = [[requests[i] for i in doc] for doc in docs]
        for group in self.plan(per_doc_requests, [max(limits[i] for i in doc) for doc in docs]):
            limit = max(1, *(limits[i] for d in group for i in docs[d.index]))
            generated = self.generate_group(group, max_new_tokens=limit)
            rows = iter(generated.generations)
            for doc_prompts in group:
                for i in docs[doc_prompts.index]:
                    out[i] = cut(next(rows), limits[i])
            spent += dataclasses.replace(generated, generations=[])
        spent.generations = out
        return spent

    def plan(self, requests_per_doc: list[list[Request]], rooms: list[int] | None = None) -> list[list[DocPrompts]]:
        """Documents of similar length together (less padding), at most `prompts_per_forward` prompts
        per group unless one document alone has more; a document's prompts stay in one group. A
        group's longest prompt plus its largest room (`rooms`: new tokens per document, the settings'
        limit by default) fits the cache: each document fits alone, but a long prompt beside another
        document's larger room (a re-decode's shorter prefix) would not."""
        rooms = rooms or [self.settings.max_new_tokens] * len(requests_per_doc)
        docs = [DocPrompts(i, requests) for i, requests in enumerate(requests_per_doc)]
        order = sorted(range(len(docs)), key=lambda i: max(len(p) for p in docs[i].prompts))
        groups: list[list[DocPrompts]] = []
        rows = longest = room = 0
        for i in order:
            doc = docs[i]
            prompts = doc.prompts
            length = max(len(p) for p in prompts)
            need = bucket(max(longest, length) + max(room, rooms[i]) + 1, LENGTH_BUCKET)
            if not groups or rows + len(prompts) > self.settings.prompts_per_forward or need > self.max_len:
                groups.append([])
                rows = longest = room = 0
            doc.shared = shared_prefix(prompts) if self.prefix_sharing else 0
            groups[-1].append(doc)
            rows += len(prompts)
            longest, room = max(longest, length), max(room, rooms[i])
        return groups

    @torch.inference_mode()
    def generate_group(
        self,
        group: list[DocPrompts],
        observe: Callable[[torch.Tensor], None] | None = None,
        max_new_tokens: int | None = None,
    ) -> Generated:
        """Every prompt of the group's documents, in the group's order (document by document)."""
        max_new_tokens = max_new_tokens or self.settings.max_new_tokens
        started = time.perf_counter()
        # Documents without a shared prefix first: their full prompts and the others' short
        # suffixes are prefilled in two calls, so a suffix is never padded to a full prompt's width.
        order = sorted(range(len(group)), key=lambda i: group[i].shared > 0)
        docs = [group[i] for i in order]
        rows = [(d, p) for d in docs for p in d.prompts]
        n_rows = max(MIN_GEMM_ROWS, batch_bucket(len(rows)) if self.compiled else len(rows))
        longest = max(len(p) for _, p in rows)
        # Room for the longest generation, plus the trash slot padding tokens write to.
        caches = self.caches("rows", n_rows, bucket(longest + max_new_tokens + 1, LENGTH_BUCKET))
        self._copy_shared_prefixes(docs, rows, caches)
        split = sum(len(d.prompts) for d in docs if not d.shared)
        lengths = [len(p) - d.shared for d, p in rows]
        ranges = [
            (lo + a, lo + b)
            for lo, hi in ((0, split), (split, len(rows)))
            if hi > lo
            for a, b in prefill_ranges(lengths[lo:hi], self.call_tokens)
        ]
        logits = [self._prefill_rows(caches, rows, lo, hi) for lo, hi in ranges]
        # Rows that only pad the batch to its compiled shape start from any finite logits.
        logits.append(torch.zeros(n_rows - len(rows), self.model.shape.vocab_size, device=self.device))
        self.model.caches = caches
        self._sync()
        decode_started = time.perf_counter()
        prefill_ms = (decode_started - started) * 1000

        if observe is not None:
            observe = self._in_group_order(observe, group, order)
        ends = self._tensor([len(p) for _, p in rows] + [1] * (n_rows - len(rows)))
        padding = self._tensor([False] * len(rows) + [True] * (n_rows - len(rows)), torch.bool)
        grammars = [r.grammar for d in docs for r in d.requests]
        fed = [r.prefix for d in docs for r in d.requests]
        value_only = [r.value_only for d in docs for r in d.requests]
        constrained = any(g is not None for g in grammars)
        grammar_started = time.perf_counter()
        prefills = len(logits) - 1 + (1 if any(d.shared for d in docs) else 0)
        decoding = Decoding(
            self.model,
            self.attend,
            self.decode_step,
            self.eos_id,
            self.settings.top_alternatives,
            max_new_tokens,
            self.signals,
            self.constrainer.grammar(grammars, fed, n_rows, self.model.shape.vocab_size) if constrained else None,
            self.breaking,
            self._shrink,
        )
        grammar_ms = ms_since(grammar_started)
        stops = self._tensor(value_only + [False] * (n_rows - len(rows)), torch.bool) if any(value_only) else None
        decoded = decode_n_tokens(decoding, torch.cat(logits), ends, padding, observe, stops)
        flat = collect_generations(decoded.steps, self.eos_id, value_only, self.constrainer.tokens.breaking)
        flat = flat[: len(rows)]
        decode_ms = ms_since(decode_started)
        by_doc: list[list[Generation]] = [[] for _ in group]
        cursor = 0
        for i, doc in zip(order, docs, strict=True):
            by_doc[i] = flat[cursor : cursor + len(doc.prompts)]
            cursor += len(doc.prompts)
        return Generated(
            [g for doc_generations in by_doc for g in doc_generations],
            prefill_ms,
            decode_ms,
            grammar_ms,
            Passes(prefills + decoded.passes, decoded.passes),
        )

    def _shrink(self, going: torch.Tensor, ended: torch.Tensor) -> torch.Tensor | None:
        """Move the rows still `going` (and ended ones, to pad them to a batch) into the next smaller
        batch bucket's caches, once they fit one; the rows kept, in their new order. A step's cost
        grows with its rows on the CPU (8.8 against 4.1 ms at 16 and 1 rows with the demo model) and
        with the keys read on an accelerator, and the rows of a batch end dozens of steps apart."""
        current = self.model.caches[0].k.shape[0]
        rows = max(MIN_GEMM_ROWS, batch_bucket(len(going)) if self.compiled else len(going))
        if batch_bucket(rows) >= batch_bucket(current):
            return None
        kept = torch.cat([going, ended[: rows - len(going)]])
        caches = self.caches("rows", rows, self.model.caches[0].k.shape[1])
        for new, old in zip(caches, self.model.caches, strict=True):
            new.k.copy_(old.k[kept])
            new.v.copy_(old.v[kept])
        self.model.caches = caches
        return kept

    def _in_group_order(self, observe, group: list[DocPrompts], order: list[int]):
        """`observe`, fed the batch's logits rows in the group's order of prompts (the batch's own
        order puts documents without a shared prefix first)."""
        first_row, cursor = {}, 0
        for i in order:
            first_row[i] = cursor
            cursor += len(group[i].prompts)
        rows = self._tensor([first_row[i] + j for i, doc in enumerate(group) for j in range(len(doc.prompts))])
        return lambda logits: observe(logits[rows])

    def _prefill_rows(self, caches: nn.ModuleList, rows, lo: int, hi: int) -> torch.Tensor:
        """Prefill rows lo..hi of the batch from where their shared prefix (if any) ends."""
        self.model.caches = nn.ModuleList(c.view(hi - lo, c.k.shape[1], start=lo) for c in caches)
        starts = [d.shared for d, _ in rows[lo:hi]]
        tokens = [p[start:] for (_, p), start in zip(rows[lo:hi], starts, strict=True)]
        return prefill(
            self.model, self.attend, self._padded(tokens), self._tensor(starts), self._tensor([len(t) for t in tokens])
        )

    def _copy_shared_prefixes(self, docs: list[DocPrompts], rows, caches: nn.ModuleList) -> None:
        """Prefill each document's shared prefix once and copy its KV into the rows of its prompts."""
        sharing = [d for d in docs if d.shared]
        if not sharing:
            return
        width = max(d.shared for d in sharing)
        prefix_caches = self.caches("prefix", len(sharing), bucket(width + 1, LENGTH_BUCKET))
        self.model.caches = prefix_caches
        tokens = self._padded([d.prompts[0][: d.shared] for d in sharing])
        prefill(
            self.model, self.attend, tokens, self._tensor([0] * len(sharing)), self._tensor([d.shared for d in sharing])
        )
        source = {d.index: i for i, d in enumerate(sharing)}
        targets = [r for r, (d, _) in enumerate(rows) if d.shared]
        sources = self._tensor([source[d.index] for d, _ in rows if d.shared])
        for cache, prefix in zip(caches, prefix_caches, strict=True):
            cache.k[targets, :width] = prefix.k[sources, :width]
            cache.v[targets, :width] = prefix.v[sources, :width]

    def caches(self, pool: str, batch: int, length: int) -> nn.ModuleList:
        """Views of `batch` rows and `length` positions into the pool's preallocated buffers."""
        key = (pool, batch, length)
        if key not in self._views:
            if length > self.max_len:
                raise ValueError(f"{length} positions exceed the cache's {self.max_len}; prompts must be fitted first")
            rows = batch_bucket(batch)
            full = self._buffers.get((pool, rows))
            if full is None or full[0].k.shape[1] < length:
                # Grow to what is asked (at least doubling, at most the window): a full-window cache
                # for every bucket up front would cost seconds of zero-filling and idle memory.
                grown = length if full is None else min(self.max_len, max(length, 2 * full[0].k.shape[1]))
                full = self._buffers[(pool, rows)] = self.model.new_caches(rows, grown, heads_first=self.heads_first)
                for stale in [k for k in self._views if k[0] == pool and batch_bucket(k[1]) == rows]:
                    del self._views[stale]
            self._views[key] = nn.ModuleList(cache.view(batch, length) for cache in full)
        return self._views[key]

    def _padded(self, sequences: list[list[int]]) -> torch.Tensor:
        # Right padding: every row starts at position 0 of the ragged cache (see model/runner/attention.py).
        # At least MIN_GEMM_ROWS columns, so that even one short row gives the layers' GEMMs 8 rows.
        width = max(MIN_GEMM_ROWS, *(len(s) for s in sequences))
        return self._tensor([s + [self.pad_id] * (width - len(s)) for s in sequences])

    def _tensor(self, values, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
