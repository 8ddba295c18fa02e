"""The engine's settings; part of the worker's one settings object (`streams.settings.Settings`)."""

from __future__ import annotations

from typing import Literal

import msgspec

DEFAULT_MODEL = "DAMO-NLP/SeqGPT-560M"


class EngineSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: str = DEFAULT_MODEL
    engine: Literal["reference"] = "reference"
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_new_tokens: int = 128
    max_input_tokens: int = 1024
    labels_per_prompt: int = 6
    prompts_per_forward: int = 32
    confidence_threshold: float = 0.85
    entropy_threshold: float = 2.5
    top_alternatives: int = 5
