"""ALiBi attention over a static KV cache, with the backend picked at run time.

The cache is *ragged*: every sequence starts at cache position 0, whatever its length, so a key's
cache index is its token position and ALiBi needs no position bookkeeping. No left
padding means a document's numbers do not depend on its neighbours' lengths, which is what makes
batch-invariant outputs possible. A query at position p sees the keys at positions <= p; a row's
unused cache slots all lie beyond its queries, so causality is the only mask needed.

Backends (all compute the same function; see tests/test_fast_engine.py):
- `flash`: flash-attn's `flash_attn_with_kvcache` with `alibi_slopes` for decode steps (CUDA,
           package installed); prefill through FlexAttention
- `flex`:  PyTorch FlexAttention with an ALiBi `score_mod` (CUDA; runs on CPU too, for testing)
- `sdpa`:  `scaled_dot_product_attention` with the ALiBi + causal bias as a float mask
- `eager`: matmul, masked softmax in fp32, matmul: the plainest statement of the computation, and
           on the CPU the one whose rounding does not depend on the batch (the CPU default)
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from model.runner.kv_cache import KVCache


def alibi_slopes(n_head: int) -> torch.Tensor:
    """BLOOM's per-head slopes (geometric, with interleaved extras when n_head is not a power of 2),
    computed with the same float32 operations as transformers so they agree to the bit."""
    closest = 2 ** math.floor(math.log2(n_head))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != n_head:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        extra = torch.arange(1, 1 + 2 * min(closest, n_head - closest), 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra)])
    return slopes


def available_backends(device: torch.device) -> list[str]:
    found = []
    if device.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        found.append("flash")
    if _has_flex():
        found.append("flex")
    return [*found, "sdpa", "eager"]


def pick_backend(device: torch.device, requested: str = "auto") -> str:
    """The fastest backend this machine has, or the requested one if it is available here."""
    available = available_backends(device)
    if requested != "auto":
        if requested not in available:
            raise ValueError(f"attention backend {requested!r} is not available here (have: {', '.join(available)})")
        return requested
    # On the CPU, eager: SDPA's CPU kernel rounds differently as the key length changes (by 1e-7,
    # measured), which would make a document's output depend on its batch mates' lengths; eager's
    # matmul + masked softmax does not. FlexAttention and flash-attn earn their place on CUDA.
    return available[0] if device.type == "cuda" else "eager"


def _has_flex() -> bool:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


class Positions:
    """Where a forward's new tokens sit, and what every layer's attention derives from that: worked
    out once per forward, where each layer used to work it out again (the keys' reach reads the
    positions on the host, a wait for the device on an accelerator; eager's ALiBi and causal mask
    are a few small operations, 8% of a 2-layer model's decode step on the CPU, ops/BENCHMARKS.md).

    `q` [B, S]: the cache positions of each row's S new tokens (consecutive per row; a row's padding
    tokens sit at the cache's last, never-attended slot).
    """

    def __init__(self, q: torch.Tensor, slopes: torch.Tensor, cache_len: int) -> None:
        self.q = q
        self.slopes = slopes.to(q.device)
        self._cache_len = cache_len
        self._kv_len: int | None = None
        self._bias: tuple[torch.Tensor, torch.Tensor] | torch.Tensor | None = None
        self._mask: torch.Tensor | None = None

    @property
    def kv_len(self) -> int:
        """The keys attended (see `_kv_len`); asked for only by the backends that read it, so that
        flash-attn's decode step, which does not, never waits for the device to answer it."""
        if self._kv_len is None:
            self._kv_len = _kv_len(self.q, self._cache_len)
        return self._kv_len

    def add_bias(self, scores: torch.Tensor) -> torch.Tensor:
        """`scores` [B, H, S, kv_len] (fp32) plus ALiBi (slope * key position), -inf on keys after
        the query, in place. The same additions as adding ALiBi and then masking, bit for bit: a
        finite score plus -inf is -inf."""
        if self._bias is None:
            keys = torch.arange(self.kv_len, device=self.q.device)
            alibi = self.slopes[None, :, None, None] * keys
            after = (keys[None, None, :] > self.q[:, :, None])[:, None]
            # One decode step's bias is small ([B, H, 1, L]): one tensor, one addition per layer. A
            # prefill's would be [B, H, S, L]: it keeps the two broadcast parts.
            self._bias = alibi.masked_fill(after, float("-inf")) if self.q.shape[1] == 1 else (alibi, after)
        if isinstance(self._bias, tuple):
            alibi, after = self._bias
            return scores.add_(alibi).masked_fill_(after, float("-inf"))
        return scores.add_(self._bias)

    def mask(self, dtype: torch.dtype) -> torch.Tensor:
        """SDPA's float mask [B, H, S, kv_len]: ALiBi, -inf on keys after the query.

        BLOOM adds slope * key_position; this adds slope * (key_position - query_position), which
        differs by a per-query constant (softmax ignores it) and stays small near the diagonal, where
        BF16 has the precision to represent it."""
        if self._mask is None:
            keys = torch.arange(self.kv_len, device=self.q.device)
            distance = keys[None, None, :] - self.q[:, :, None]  # [B, S, kv_len], <= 0 where allowed
            alibi = self.slopes[None, :, None, None] * distance[:, None].to(torch.float32)
            self._mask = alibi.masked_fill(distance[:, None] > 0, float("-inf")).to(dtype)
        return self._mask


Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, KVCache, Positions], torch.Tensor]


def make_attention(backend: str) -> Attend:
    """attend(q, k, v, cache, at) -> out

    q, k, v: [B, S, H, D] for the S new tokens of each row, at the cache positions `at.q` [B, S].
    The new keys and values are written into the cache at those positions, then each query
    attends over the row's cache up to its own position. Returns [B, S, H, D].
    """
    return {"flash": _flash, "flex": _flex, "sdpa": _sdpa, "eager": _eager}[backend]


def _kv_len(q_pos: torch.Tensor, length: int) -> int:
    # A compiled decode step needs fixed shapes: it attends over the whole cache. Otherwise attend
    # only over the filled part, which is much shorter than a cache sized for generation.
    # (The last slot is the trash slot padding tokens write to; see generate.prefill.)
    # Rounded up to whole KV_CHUNKs, which eager attention sums over (see _eager).
    if q_pos.shape[1] == 1 and torch.compiler.is_compiling():
        return length
    filled = int(q_pos[q_pos < length - 1].max()) + 1
    return min(length, -(-filled // KV_CHUNK) * KV_CHUNK)


# Keys are summed over in chunks of this many (cache lengths are multiples of it).
KV_CHUNK = 64


def _eager(q, k, v, cache, at: Positions):
    keys, values = cache.update(at.q, k, v)
    kv_len = at.kv_len
    keys, values = keys[:, :kv_len].transpose(1, 2), values[:, :kv_len].transpose(1, 2)  # [B, H, L, D]
    # Scores in fp32 whatever the weights' dtype, so BLOOM's own ALiBi form (slope * key position)
    # loses nothing; built in place, as these [B, H, S, L] tensors are the prefill's largest.
    scores = torch.matmul(q.transpose(1, 2), keys.transpose(-1, -2)).float()
    probs = torch.softmax(at.add_bias(scores.mul_(1 / math.sqrt(q.shape[-1]))), dim=-1).to(q.dtype)
    # probs @ values in fixed chunks of keys, summed in order: a GEMM's rounding depends on its
    # reduction length, so one long matmul would make a row's output depend on how far its batch
    # mates reach; chunks past a row's last key add exact zeros. Two ways to the same numbers (bit
    # for bit): a prefill takes one product per chunk over views of the cache, where one batched
    # product over (batch, heads, chunks) would copy its large probabilities and the values first; a
    # decode step takes the batched product, whose copies are small and one call beats one per
    # chunk (ops/BENCHMARKS.md).
    b, h, s, _ = probs.shape
    if s > 1:
        out = probs[..., :KV_CHUNK] @ values[:, :, :KV_CHUNK]
        for start in range(KV_CHUNK, kv_len, KV_CHUNK):  # in order: torch.sum may pair terms differently
            out = out + probs[..., start : start + KV_CHUNK] @ values[:, :, start : start + KV_CHUNK]
        return out.transpose(1, 2)
    chunks = kv_len // KV_CHUNK
    partial = probs.view(b, h, s, chunks, KV_CHUNK).transpose(2, 3) @ values.reshape(b, h, chunks, KV_CHUNK, -1)
    out = partial[:, :, 0]
    for chunk in range(1, chunks):
        out = out + partial[:, :, chunk]
    return out.transpose(1, 2)


def _sdpa(q, k, v, cache, at: Positions):
    keys, values = cache.update(at.q, k, v)
    kv_len = at.kv_len
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        keys[:, :kv_len].transpose(1, 2),
        values[:, :kv_len].transpose(1, 2),
        attn_mask=at.mask(q.dtype),
    )
    return out.transpose(1, 2)


def _flex(q, k, v, cache, at: Positions):
    from torch.nn.attention.flex_attention import flex_attention

    keys, values = cache.update(at.q, k, v)
    kv_len, slopes = at.kv_len, at.slopes
    start = at.q[:, :1]  # [B, 1]: positions are consecutive from each row's first new token

    def score_mod(score, b, h, q_idx, kv_idx):
        distance = kv_idx - (start[b, 0] + q_idx)
        return torch.where(distance <= 0, score + slopes[h] * distance, -float("inf"))

    out = flex_attention(
        q.transpose(1, 2), keys[:, :kv_len].transpose(1, 2), values[:, :kv_len].transpose(1, 2), score_mod=score_mod
    )
    return out.transpose(1, 2)


def _flash(q, k, v, cache, at: Positions):
    """flash-attn's kvcache kernel for decode steps; prefill goes through FlexAttention, also fused.

    flash-attn appends k/v at cache_seqlens itself: right for one new token per row, but in a
    padded prefill it would write each row's padding past its end, possibly past the cache.
    """
    if q.shape[1] > 1:
        return _flex(q, k, v, cache, at) if _has_flex() else _sdpa(q, k, v, cache, at)
    from flash_attn import flash_attn_with_kvcache

    # Same ragged layout as ours (causality aligned to each row's length). Its ALiBi is
    # -slope*|i-j|, a per-row shift of ours: the same softmax.
    return flash_attn_with_kvcache(
        q,
        cache.k,
        cache.v,
        k=k,
        v=v,
        cache_seqlens=at.q[:, 0].to(torch.int32),
        causal=True,
        alibi_slopes=at.slopes.float(),
    )
