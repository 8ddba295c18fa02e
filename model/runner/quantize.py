"""Weights in int8 (LLM.int8) or 4-bit NF4, through bitsandbytes: the blocks' linear layers of our
BLOOM modules replaced by bitsandbytes' `Linear8bitLt` / `Linear4bit`.

CUDA only (bitsandbytes' kernels); bitsandbytes is the optional `gpu` extra, imported only when a
setting asks for it. The embeddings and the LM head tied to them stay in the model's dtype, as
bitsandbytes' own integrations leave them: over a 250,880-entry vocabulary the head decides the
greedy choice, and quantising it would move more choices than the blocks do.
"""

from __future__ import annotations

from types import ModuleType
from typing import Literal

import torch
from torch import nn

from model.runner.bloom import Bloom

Quantize = Literal["none", "int8", "nf4"]

INSTALL_HINT = "pip install 'seqstream[gpu]' (or pip install 'bitsandbytes>=0.43')"


class QuantizeError(ValueError):
    """A quantisation setting this machine cannot honour."""


def check_quantize(quantize: Quantize, device: torch.device) -> None:
    """Raise before any weight is touched where `quantize` cannot run on `device`."""
    if quantize == "none":
        return
    if device.type != "cuda":
        raise QuantizeError(
            f'quantize = "{quantize}" needs a CUDA device (bitsandbytes\' int8 and 4-bit kernels); this engine '
            f"runs on {device}. Set SEQSTREAM_MODEL__QUANTIZE=none, or run on a GPU."
        )
    bitsandbytes()


def bitsandbytes() -> ModuleType:
    """The bitsandbytes module, or an error saying how to install it."""
    try:
        import bitsandbytes
    except ImportError as error:
        raise QuantizeError(f"quantized weights need bitsandbytes, which is not installed: {INSTALL_HINT}") from error
    return bitsandbytes


def quantize_linears(model: Bloom, quantize: Quantize, device: torch.device) -> Bloom:
    """`model` with every block's linear layers in `quantize`'s format, on `device` (a CUDA device:
    bitsandbytes quantises a weight as it moves there)."""
    check_quantize(quantize, device)
    if quantize == "none":
        return model
    bnb = bitsandbytes()
    for block in model.h:
        for owner, name in (
            (block.self_attention, "query_key_value"),
            (block.self_attention, "dense"),
            (block.mlp, "dense_h_to_4h"),
            (block.mlp, "dense_4h_to_h"),
        ):
            setattr(owner, name, _quantized(bnb, getattr(owner, name), quantize, device))
    return model


def _quantized(bnb: ModuleType, linear: nn.Linear, quantize: Quantize, device: torch.device) -> nn.Module:
    weight = linear.weight.data.to("cpu")
    bias = linear.bias is not None
    if quantize == "int8":
        layer = bnb.nn.Linear8bitLt(linear.in_features, linear.out_features, bias=bias, has_fp16_weights=False)
        layer.weight = bnb.nn.Int8Params(weight, requires_grad=False, has_fp16_weights=False)
    else:
        layer = bnb.nn.Linear4bit(
            linear.in_features, linear.out_features, bias=bias, compute_dtype=linear.weight.dtype, quant_type="nf4"
        )
        layer.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4")
    if bias:
        layer.bias = nn.Parameter(linear.bias.data.to("cpu"), requires_grad=False)
    return layer.to(device)
