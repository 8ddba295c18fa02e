"""Loading a checkpoint (local directory or hub id) the same way for every engine and for tests."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from model.config import DEFAULT_MODEL, EngineSettings

log = logging.getLogger(__name__)

# A checkpoint that SeqStream built itself (tests, demos) says so in this file; SeqGPT's does not.
MANIFEST = "seqstream-model.json"
# The shipped demo model (`seqstream demo-model build`): what runs when SeqGPT is not here.
DEMO_MODEL_DIR = Path(__file__).resolve().parent.parent / "demo"


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


def resolve_model_path(path: str) -> tuple[str, bool]:
    """The checkpoint to load for `path`, and whether it is the demo model standing in for SeqGPT:
    only when the default is asked for and no copy of SeqGPT is here (no directory of that name,
    nothing in the hub cache), so a configured model is never silently replaced."""
    if path != DEFAULT_MODEL or Path(path).expanduser().is_dir() or _in_hub_cache(path):
        return path, False
    if (DEMO_MODEL_DIR / "model.safetensors").is_file():
        return str(DEMO_MODEL_DIR), True
    return path, False


def _in_hub_cache(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def load_model(settings: EngineSettings) -> LoadedModel:
    device = resolve_device(settings.device)
    dtype = resolve_dtype(settings.dtype, device)
    path, standing_in = resolve_model_path(settings.path)
    if standing_in:
        log.warning(
            "no SeqGPT-560M weights here: loading the DEMO MODEL %s instead. It is a small model trained on "
            "generated documents (see its %s); its output is for trying the pipeline, not for production. "
            "Set SEQSTREAM_MODEL__PATH to a SeqGPT copy for real output.",
            path,
            MANIFEST,
        )
    local = Path(path).expanduser()
    source = str(local) if local.is_dir() else path
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
    name = model_name(path)
    log.info("model %s loaded from %s", name, source)
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, device=device, dtype=dtype, demo=demo)


def model_name(path: str) -> str:
    """What records call the model: a hub id as given, a local checkpoint by its directory's name
    (`/srv/models/SeqGPT-560M` -> `SeqGPT-560M`), the shipped demo model `seqstream-demo`. Never a
    filesystem path: that is the machine's business (the worker logs it at start), not the reader's."""
    local = Path(path).expanduser()
    if not local.is_dir():
        return path
    if local.resolve() == DEMO_MODEL_DIR:
        return "seqstream-demo"
    return local.resolve().name
