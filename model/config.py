"""The engine's settings; part of the worker's one settings object (`streams.settings.Settings`)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from schemas.messages import DecodeSettings

# Where no copy of it is found (no such directory, nothing in the hub cache), the shipped demo model
# model/demo/ stands in, loudly (model/runner/loading.py: resolve_model_path).
DEFAULT_MODEL = "DAMO-NLP/SeqGPT-560M"


class EngineSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: str = DEFAULT_MODEL
    # "fast": our BLOOM runner (model/runner/fast.py); "reference": transformers' generate(), the oracle.
    engine: Literal["fast", "reference"] = "fast"
    # auto = the best this machine has: flash-attn, else FlexAttention on CUDA; eager on CPU
    # (the one whose rounding does not depend on the batch; see model/runner/attention.py).
    attention: Literal["auto", "flash", "flex", "sdpa", "eager"] = "auto"
    # Compile the decode step (CUDA graphs on GPU); auto = on CUDA only, where it pays for itself.
    compile: Literal["auto", "on", "off"] = "auto"
    prefix_sharing: bool = True
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_new_tokens: int = 128
    max_input_tokens: int = 1024
    labels_per_prompt: int = 6
    prompts_per_forward: int = 32
    confidence_threshold: float = 0.85
    entropy_threshold: float = 2.5
    # Deciding steps above `entropy_threshold` a record needs before it alarms (review and an alert).
    # One is the seed design's rule; garbage input raises many, a rare character copied right raises one.
    entropy_alarm_steps: Annotated[int, msgspec.Meta(ge=1)] = 1
    top_alternatives: int = 5
    # Decode only answers the parser reads, with values copied from the source (model/grammar/).
    constrained: bool = True
    # Processes preparing a batch's documents beside the engine's own (model/prepare_pool.py): its
    # tokenising, word segmentation and grammar tables over more cores. 0: the engine's process alone.
    prepare_processes: Annotated[int, msgspec.Meta(ge=0)] = 0
    # The least text (characters) a preparing process is sent: a smaller batch is prepared at home,
    # where the trip would cost more than it saves (2,000 on a 2-core CPU: ops/BENCHMARKS.md).
    prepare_share_chars: Annotated[int, msgspec.Meta(ge=1)] = 2000
    # The blocks' weights in int8 (LLM.int8) or 4-bit NF4 through bitsandbytes (model/runner/quantize.py):
    # CUDA and the fast engine only, bitsandbytes from the `gpu` extra.
    quantize: Literal["none", "int8", "nf4"] = "none"
    # The lexicon backoff (model/answers/backoff.py): for a label answered None beside a value of its
    # type, Baidu LAC's entities and the typed detectors' values become candidates the model chooses
    # among, for the review record; LAC's entities feed the unclaimed-value check too.
    backoff: bool = True
    # LAC's user dictionary (model/values/entities.py), e.g. an enterprise's own company names: a UTF-8
    # file, one `word TAG` a line (TAG: PER, LOC, ORG or TIME; a bare word is an ORG). None: LAC alone.
    user_dictionary: str | None = None


def decode_settings(settings: EngineSettings) -> DecodeSettings:
    """What a record says about how it was decoded."""
    return DecodeSettings(
        max_new_tokens=settings.max_new_tokens,
        max_input_tokens=settings.max_input_tokens,
        labels_per_prompt=settings.labels_per_prompt,
        confidence_threshold=settings.confidence_threshold,
        entropy_threshold=settings.entropy_threshold,
        entropy_alarm_steps=settings.entropy_alarm_steps,
    )
