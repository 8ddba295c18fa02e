"""Loading a checkpoint (local directory or hub id) the same way for every engine and for tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from model.config import EngineSettings

# A checkpoint that SeqStream built itself (tests, demos) says so in this file; SeqGPT's does not.
MANIFEST = "seqstream-model.json"


class ModelNotFoundError(RuntimeError):
    pass


@dataclass
class LoadedModel:
    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    demo: bool


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        # BF16 where the hardware is built for it; fp32 on CPU, where bf16 matmuls are slow and coarse.
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, name)


def load_model(settings: EngineSettings) -> LoadedModel:
    device = resolve_device(settings.device)
    dtype = resolve_dtype(settings.dtype, device)
    local = Path(settings.path).expanduser()
    source = str(local) if local.is_dir() else settings.path
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(
            f"could not load model {settings.path!r}: {exc}\n"
            "No local directory has that name and the model hub could not serve it. On a machine with "
            "network access run `huggingface-cli download DAMO-NLP/SeqGPT-560M --local-dir DIR`, copy DIR "
            "here and set SEQSTREAM_MODEL__PATH=DIR (or pass --model DIR)."
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device).eval()
    demo = (local / MANIFEST).is_file()
    return LoadedModel(name=settings.path, model=model, tokenizer=tokenizer, device=device, dtype=dtype, demo=demo)
