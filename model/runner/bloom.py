"""BLOOM as plain modules: embeddings + LayerNorm, blocks (fused QKV, ALiBi attention, GELU MLP),
final LayerNorm, LM head tied to the embeddings.

Parameter names mirror transformers' `BloomModel`, so a checkpoint's state dict loads as is. The
LM head runs only on the positions whose logits are used: one per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BloomConfig, PreTrainedModel

from model.runner.attention import Attend, Positions, alibi_slopes
from model.runner.kv_cache import KVCache

# Below 8 rows the CPU's GEMM switches kernels (gemv, small-M paths) and rounds differently (by
# 1e-5 in logits, measured); every matmul gets at least 8 rows so that a row's numbers do not
# depend on how many rows share the call.
MIN_GEMM_ROWS = 8


@dataclass(frozen=True)
class BloomShape:
    vocab_size: int
    hidden_size: int
    n_head: int
    n_layer: int
    eps: float

    @classmethod
    def of(cls, config: BloomConfig) -> BloomShape:
        return cls(config.vocab_size, config.hidden_size, config.n_head, config.n_layer, config.layer_norm_epsilon)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_head


class LayerNorm(nn.LayerNorm):
    """LayerNorm whose statistics are taken in fp32 even when the weights are BF16."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return super().forward(x)
        weight, bias = self.weight.float(), self.bias.float()
        return F.layer_norm(x.float(), self.normalized_shape, weight, bias, self.eps).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, shape: BloomShape) -> None:
        super().__init__()
        self.shape = shape
        self.query_key_value = nn.Linear(shape.hidden_size, 3 * shape.hidden_size)
        self.dense = nn.Linear(shape.hidden_size, shape.hidden_size)

    def forward(self, x, cache: KVCache, at: Positions, attend: Attend) -> torch.Tensor:
        batch, length, _ = x.shape
        # BLOOM fuses per head: [q_h, k_h, v_h] for each head h, not [Q, K, V].
        qkv = self.query_key_value(x).view(batch, length, self.shape.n_head, 3, self.shape.head_dim)
        q, k, v = qkv.unbind(dim=3)
        out = attend(q, k.contiguous(), v.contiguous(), cache, at)
        return self.dense(out.reshape(batch, length, self.shape.hidden_size))


class MLP(nn.Module):
    def __init__(self, shape: BloomShape) -> None:
        super().__init__()
        self.dense_h_to_4h = nn.Linear(shape.hidden_size, 4 * shape.hidden_size)
        self.dense_4h_to_h = nn.Linear(4 * shape.hidden_size, shape.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, shape: BloomShape) -> None:
        super().__init__()
        self.input_layernorm = LayerNorm(shape.hidden_size, eps=shape.eps)
        self.self_attention = Attention(shape)
        self.post_attention_layernorm = LayerNorm(shape.hidden_size, eps=shape.eps)
        self.mlp = MLP(shape)

    def forward(self, x, cache, at: Positions, attend) -> torch.Tensor:
        x = x + self.self_attention(self.input_layernorm(x), cache, at, attend)
        return x + self.mlp(self.post_attention_layernorm(x))


class Bloom(nn.Module):
    def __init__(self, shape: BloomShape) -> None:
        super().__init__()
        self.shape = shape
        self.word_embeddings = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.word_embeddings_layernorm = LayerNorm(shape.hidden_size, eps=shape.eps)
        self.h = nn.ModuleList(Block(shape) for _ in range(shape.n_layer))
        self.ln_f = LayerNorm(shape.hidden_size, eps=shape.eps)
        self.register_buffer("slopes", alibi_slopes(shape.n_head), persistent=False)
        # The cache in use, one per layer. Held by the module (as in gpt-fast) so that a compiled
        # step sees it as model state with fixed addresses, which CUDA graphs need.
        self.caches = nn.ModuleList()

    def forward(
        self,
        tokens: torch.Tensor,
        q_pos: torch.Tensor,
        attend: Attend,
        last: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [B, V] (fp32) at index `last` [B] of each row's new tokens (the only one, when S=1)."""
        x = self._hidden(tokens, q_pos, attend)
        return self._head(x[:, 0] if last is None else x[torch.arange(x.shape[0], device=x.device), last])

    def every_logits(self, tokens: torch.Tensor, q_pos: torch.Tensor, attend: Attend, at: torch.Tensor) -> torch.Tensor:
        """Logits [N, V] (fp32) after the new tokens at the flat positions `at` (row * S + step) of
        [B, S]: what scoring an answer needs (model/runner/score.py). The LM head, a large share of a
        small model's pass over a large vocabulary, runs only at the positions asked for."""
        x = self._hidden(tokens, q_pos, attend)
        return self._head(x.reshape(-1, x.shape[-1])[at])

    def _hidden(self, tokens: torch.Tensor, q_pos: torch.Tensor, attend: Attend) -> torch.Tensor:
        x = self.word_embeddings_layernorm(self.word_embeddings(tokens))
        at = Positions(q_pos, self.slopes, self.caches[0].k.shape[1])  # every layer's cache is as long
        for block, cache in zip(self.h, self.caches, strict=True):
            x = block(x, cache, at, attend)
        return x

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if rows < MIN_GEMM_ROWS:
            x = F.pad(x, (0, 0, 0, MIN_GEMM_ROWS - rows))
        return F.linear(self.ln_f(x), self.word_embeddings.weight)[:rows].float()

    def new_caches(self, batch: int, max_len: int, *, heads_first: bool) -> nn.ModuleList:
        weight = self.word_embeddings.weight
        s = self.shape
        return nn.ModuleList(
            KVCache.allocate(batch, max_len, s.n_head, s.head_dim, weight.dtype, weight.device, heads_first=heads_first)
            for _ in range(s.n_layer)
        )

    @classmethod
    def from_transformers(cls, hf_model: PreTrainedModel) -> Bloom:
        """Our module with the weights of a loaded `BloomForCausalLM` (any BLOOM size)."""
        weight = hf_model.get_input_embeddings().weight
        with torch.device("meta"):
            model = cls(BloomShape.of(hf_model.config))
        state = {k.removeprefix("transformer."): v for k, v in hf_model.state_dict().items() if k != "lm_head.weight"}
        model.load_state_dict(state, strict=False, assign=True)
        model.slopes = alibi_slopes(model.shape.n_head).to(weight.device)
        missing = {n for n, p in model.named_parameters() if p.is_meta}
        if missing:
            raise ValueError(f"checkpoint lacks {sorted(missing)[:5]}")
        return model.eval()
