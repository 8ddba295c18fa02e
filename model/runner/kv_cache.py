"""A preallocated KV cache for one layer: [batch, max_len, heads, head_dim], written in place.

Buffers are allocated once per batch bucket at the longest length the engine serves; shorter
buckets are views into them. Fixed shapes and fixed addresses are what let the decode step compile
once per (batch, length) bucket and replay as a CUDA graph. Every attention backend reads that
shape. In memory each (row, head) holds its positions together (heads first, as gpt-fast's cache),
so attention's [batch, heads, length, head_dim] keys are a view, where a positions-first buffer had
them copied into that order by every layer at every step (2x the model's step at 64 rows and 24
layers on a CPU, ops/BENCHMARKS.md), and the eager backend's chunked product reads the values in
place. flash-attn's kvcache kernel gets positions first, its own layout (`heads_first=False`).
"""

from __future__ import annotations

import torch
from torch import nn


class KVCache(nn.Module):
    def __init__(self, k: torch.Tensor, v: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("k", k, persistent=False)
        self.register_buffer("v", v, persistent=False)

    @classmethod
    def allocate(
        cls, batch: int, max_len: int, n_head: int, head_dim: int, dtype, device, *, heads_first: bool
    ) -> KVCache:
        if heads_first:
            shape = (batch, n_head, max_len, head_dim)
            return cls(*(torch.zeros(shape, dtype=dtype, device=device).transpose(1, 2) for _ in range(2)))
        shape = (batch, max_len, n_head, head_dim)
        return cls(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))

    def view(self, batch: int, length: int, start: int = 0) -> KVCache:
        """`batch` rows from `start`, and the first `length` positions, sharing this cache's storage."""
        rows = slice(start, start + batch)
        return KVCache(self.k[rows, :length], self.v[rows, :length])

    def update(self, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v [B, S, H, D] at per-row positions [B, S]; returns the whole cache."""
        index = positions[:, :, None, None].expand_as(k)
        self.k.scatter_(1, index, k)
        self.v.scatter_(1, index, v)
        return self.k, self.v
