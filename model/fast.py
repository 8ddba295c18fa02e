"""The fast engine: our BLOOM runner, static KV caches per (batch, length) bucket, a compiled
decode step, and each document's shared prompt prefix computed once for all its label chunks.

It returns the same `Generation`s as the reference engine (tests hold it to that, token for token)
and hands them to the same validation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from model.attention import make_attention, pick_backend
from model.bloom import Bloom
from model.config import EngineSettings
from model.engine import BatchResult, decode_settings
from model.generate import decode_n_tokens, make_decode_one_token, prefill
from model.loading import LoadedModel
from model.prompt import encode_prompts
from model.signals import Generation, collect_generations
from model.validate import interpret
from schemas.messages import Document, ModelInfo, Timings

LENGTH_BUCKET = 64
# A shared prefix shorter than this is not worth a separate prefill and a cache copy.
MIN_SHARED_PREFIX = 8
# Below 8 rows the CPU's GEMM switches kernels (gemv and small-M paths) and rounds differently;
# padding every batch to at least 8 rows keeps a document's numbers independent of its batch.
MIN_ROWS = 8


@dataclass
class DocPrompts:
    index: int
    prompts: list[list[int]]
    shared: int  # tokens at the start of every prompt computed once for all of them


def shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common token prefix of several prompts, leaving each at least one token."""
    if len(prompts) < 2:
        return 0
    limit = min(len(p) for p in prompts) - 1
    length = 0
    while length < limit and all(p[length] == prompts[0][length] for p in prompts):
        length += 1
    return length if length >= MIN_SHARED_PREFIX else 0


def bucket(n: int, step: int) -> int:
    return max(step, -(-n // step) * step)


def batch_bucket(n: int) -> int:
    return 1 << (n - 1).bit_length()


class FastEngine:
    def __init__(
        self,
        loaded: LoadedModel,
        settings: EngineSettings,
        *,
        backend: str | None = None,
        compile_decode: bool | None = None,
        prefix_sharing: bool | None = None,
    ) -> None:
        self.settings = settings
        self.tokenizer = loaded.tokenizer
        self.device = loaded.device
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.pad_id = int(self.tokenizer.pad_token_id)
        self.model = Bloom.from_transformers(loaded.model)
        self.backend = pick_backend(self.device, backend or settings.attention)
        self.attend = make_attention(self.backend)
        self.prefix_sharing = settings.prefix_sharing if prefix_sharing is None else prefix_sharing
        if compile_decode is None:
            compile_decode = settings.compile == "on" or (settings.compile == "auto" and self.device.type == "cuda")
        self.compiled = compile_decode
        step = make_decode_one_token(self.attend)
        if self.compiled:
            # One graph per (batch, length) bucket; CUDA graphs remove the per-step launch overhead.
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            step = torch.compile(step, mode=mode, fullgraph=True)
        self.decode_step = step
        # Per pool ("rows" for prompts, "prefix" for shared prefixes): full-length buffers per batch
        # bucket, and the (batch, length) views handed to the model.
        self._buffers: dict[tuple[str, int], nn.ModuleList] = {}
        self._views: dict[tuple[str, int, int], nn.ModuleList] = {}
        self.max_len = bucket(settings.max_input_tokens + settings.max_new_tokens + 1, LENGTH_BUCKET)
        self.info = ModelInfo(
            name=loaded.name,
            engine="fast",
            attention=self.backend + ("+compiled" if self.compiled else ""),
            dtype=str(loaded.dtype).removeprefix("torch."),
            device=str(self.device),
            demo=loaded.demo,
            decode=decode_settings(settings),
        )

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        timings = Timings()
        started = time.perf_counter()
        encoded = [
            encode_prompts(self.tokenizer, doc, self.settings.labels_per_prompt, self.settings.max_input_tokens)
            for doc in docs
        ]
        timings.tokenize_ms = _ms_since(started)

        generations: list[list[Generation]] = [[] for _ in docs]
        for group in self.plan([prompts for _, prompts, _ in encoded]):
            for doc, doc_generations in zip(group, self.generate(group, timings), strict=True):
                generations[doc.index] = doc_generations

        started = time.perf_counter()
        extractions = [
            interpret(doc, chunks, generations[i], self.decode, self.settings, truncated)
            for i, (doc, (chunks, _, truncated)) in enumerate(zip(docs, encoded, strict=True))
        ]
        timings.postprocess_ms = _ms_since(started)
        tokens = sum(len(g.token_ids) for doc in generations for g in doc)
        return BatchResult(extractions=extractions, timings=timings, generated_tokens=tokens)

    def plan(self, prompts_per_doc: list[list[list[int]]]) -> list[list[DocPrompts]]:
        """Documents of similar length together (less padding), at most `prompts_per_forward` prompts
        per group unless one document alone has more; a document's prompts stay in one group."""
        order = sorted(range(len(prompts_per_doc)), key=lambda i: max(len(p) for p in prompts_per_doc[i]))
        groups: list[list[DocPrompts]] = []
        rows = 0
        for i in order:
            prompts = prompts_per_doc[i]
            if not groups or rows + len(prompts) > self.settings.prompts_per_forward:
                groups.append([])
                rows = 0
            shared = shared_prefix(prompts) if self.prefix_sharing else 0
            groups[-1].append(DocPrompts(i, prompts, shared))
            rows += len(prompts)
        return groups

    @torch.inference_mode()
    def generate(
        self, group: list[DocPrompts], timings: Timings, observe: Callable[[torch.Tensor], None] | None = None
    ) -> list[list[Generation]]:
        started = time.perf_counter()
        rows = [(d, p) for d in group for p in d.prompts]
        n_rows = max(MIN_ROWS, batch_bucket(len(rows)) if self.compiled else len(rows))
        longest = max(len(p) for _, p in rows)
        # Room for the longest generation, plus the trash slot padding tokens write to.
        caches = self.caches("rows", n_rows, bucket(longest + self.settings.max_new_tokens + 1, LENGTH_BUCKET))

        starts = self._prefill_shared(group, rows, caches)
        suffixes = [p[start:] for (_, p), start in zip(rows, starts, strict=True)]
        suffixes += [[self.pad_id]] * (n_rows - len(rows))
        starts += [0] * (n_rows - len(rows))
        self.model.caches = caches
        logits = prefill(
            self.model,
            self.attend,
            self._padded(suffixes),
            self._tensor(starts),
            self._tensor([len(s) for s in suffixes]),
        )
        self._sync()
        decode_started = time.perf_counter()
        timings.prefill_ms += (decode_started - started) * 1000

        ends = self._tensor([start + len(s) for start, s in zip(starts, suffixes, strict=True)])
        padding = self._tensor([False] * len(rows) + [True] * (n_rows - len(rows)), torch.bool)
        steps = decode_n_tokens(
            self.model,
            self.decode_step,
            logits,
            ends,
            self.settings.max_new_tokens,
            self.eos_id,
            self.settings.top_alternatives,
            padding,
            observe,
        )
        flat = collect_generations(steps, self.eos_id)[: len(rows)]
        timings.decode_ms += _ms_since(decode_started)
        out, cursor = [], 0
        for doc in group:
            out.append(flat[cursor : cursor + len(doc.prompts)])
            cursor += len(doc.prompts)
        return out

    def _prefill_shared(self, group: list[DocPrompts], rows, caches: nn.ModuleList) -> list[int]:
        """Prefill each document's shared prefix once and copy its KV into the rows of its prompts;
        returns, per row, the position its own (unshared) tokens start at."""
        sharing = [d for d in group if d.shared]
        if not sharing:
            return [0] * len(rows)
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
        return [d.shared for d, _ in rows]

    def caches(self, pool: str, batch: int, length: int) -> nn.ModuleList:
        """Views of `batch` rows and `length` positions into the pool's preallocated buffers."""
        key = (pool, batch, length)
        if key not in self._views:
            if length > self.max_len:
                raise ValueError(f"{length} positions exceed the cache's {self.max_len}; prompts must be fitted first")
            rows = batch_bucket(batch)
            if (pool, rows) not in self._buffers:
                self._buffers[(pool, rows)] = self.model.new_caches(rows, self.max_len)
            full = self._buffers[(pool, rows)]
            self._views[key] = nn.ModuleList(cache.view(batch, length) for cache in full)
        return self._views[key]

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def _padded(self, sequences: list[list[int]]) -> torch.Tensor:
        # Right padding: every row starts at position 0 of the ragged cache (see model/attention.py).
        width = max(len(s) for s in sequences)
        return self._tensor([s + [self.pad_id] * (width - len(s)) for s in sequences])

    def _tensor(self, values, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
