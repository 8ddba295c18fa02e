"""Quantized weights (bitsandbytes int8 / NF4) are CUDA-only: elsewhere a setting asking for them fails
at once with a message that says what to do, before any weight is touched."""

from __future__ import annotations

import importlib.util

import msgspec
import pytest
import torch

from model.build import build_engine
from model.config import EngineSettings
from model.runner.quantize import QuantizeError, bitsandbytes, check_quantize


@pytest.mark.parametrize("quantize", ["int8", "nf4"])
def test_quantized_weights_off_cuda_raise_a_clear_error(engine_settings: EngineSettings, quantize: str) -> None:
    settings = msgspec.structs.replace(engine_settings, device="cpu", quantize=quantize)
    with pytest.raises(QuantizeError, match="needs a CUDA device") as raised:
        build_engine(settings)
    assert "SEQSTREAM_MODEL__QUANTIZE=none" in str(raised.value)


def test_no_quantization_is_no_check() -> None:
    check_quantize("none", torch.device("cpu"))


def test_the_reference_engine_refuses_quantized_weights(engine_settings: EngineSettings) -> None:
    settings = msgspec.structs.replace(engine_settings, device="cpu", engine="reference", quantize="int8")
    with pytest.raises(QuantizeError, match="fast engine"):
        build_engine(settings)


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is not None, reason="bitsandbytes is installed here")
def test_missing_bitsandbytes_says_how_to_install_it() -> None:
    with pytest.raises(QuantizeError, match=r"pip install 'seqstream\[gpu\]'"):
        bitsandbytes()
