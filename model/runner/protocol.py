"""What the extraction flow asks of a model runner: greedy generations for a list of requests.

One method, `generate(requests) -> Generated`, serves a document's first decode and the validation
loop's re-decodes alike (a re-decode is a request with a kept `prefix`). What a call cost, in time
and in passes through the model, comes back with its generations instead of being counted on the
runner or written into a caller's object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from transformers import PreTrainedTokenizerBase

from model.config import EngineSettings
from model.grammar.protocol import GrammarBuilder, Row
from model.signals import Generation
from schemas.messages import ModelInfo


@dataclass
class Request:
    """Greedy decoding of `prompt` + `prefix` onwards, at most `max_new_tokens` new tokens after the
    prefix; `grammar` (None: free decoding) is fed `prefix` first. Requests of one `doc`
    may share their prompts' common prefix in the model's cache. With `value_only`, the generation
    ends at its first token that holds a value break (tab, newline), as at end-of-sequence: a
    re-decode of one value needs nothing after it."""

    prompt: list[int]
    grammar: Row | None = None
    prefix: list[int] = field(default_factory=list)
    max_new_tokens: int | None = None  # None: the settings' limit
    doc: int = 0
    value_only: bool = False


@dataclass
class Passes:
    """Batches through the model, for benchmarks: `forward` counts prefills and decode passes,
    `decode` the decode passes alone."""

    forward: int = 0
    decode: int = 0

    def __add__(self, other: Passes) -> Passes:
        return Passes(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)))


@dataclass
class Generated:
    """One generation per request, in the requests' order, and what producing them took."""

    generations: list[Generation] = field(default_factory=list)
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    # The part of decode_ms spent on the grammar's masks.
    constrain_ms: float = 0.0
    passes: Passes = field(default_factory=Passes)

    def __add__(self, other: Generated) -> Generated:
        return Generated(
            self.generations + other.generations,
            self.prefill_ms + other.prefill_ms,
            self.decode_ms + other.decode_ms,
            self.constrain_ms + other.constrain_ms,
            self.passes + other.passes,
        )


class Runner(Protocol):
    """A loaded model that decodes greedily (model/runner/fast.py, model/runner/reference.py).

    `constrainer` builds the grammars that requests carry; the flow (model/engine.py) prepares them
    with the runner's own, so that one swapped in (an oracle, a checking one) serves both sides. A
    runner knows it only through its protocol (model/grammar/protocol.py).
    """

    info: ModelInfo
    settings: EngineSettings
    tokenizer: PreTrainedTokenizerBase
    constrainer: GrammarBuilder

    def generate(self, requests: Sequence[Request]) -> Generated: ...
