"""What the pipeline asks of an extraction engine, and the one extraction flow both engines share:
encode the prompts, prepare their grammars, generate, revisit failing values, interpret. The engines
differ only in how they generate (model/runner/fast.py, model/runner/reference.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from transformers import PreTrainedTokenizerBase

from model.answers.prompt import EncodedDocument, encode_prompts
from model.answers.retry import Continuation, revisit
from model.answers.validate import Detokenizer, Extraction, interpret
from model.config import EngineSettings
from model.grammar.mask import Constrainer, RowGrammar
from model.grammar.token_bytes import TokenBytes
from model.signals import Generation
from schemas.messages import DecodeSettings, Document, ModelInfo, Timings


@dataclass
class BatchResult:
    extractions: list[Extraction]
    timings: Timings = field(default_factory=Timings)
    generated_tokens: int = 0


class Engine(Protocol):
    info: ModelInfo

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        """One `Extraction` per document, in order. May raise; the caller isolates the culprit."""
        ...


def ms_since(started: float) -> float:
    """Milliseconds since a `time.perf_counter()` reading."""
    return (time.perf_counter() - started) * 1000


def sum_timings(parts: Iterable[Timings]) -> Timings:
    """Stage by stage, the time several batches took one after another."""
    total = Timings()
    for part in parts:
        for name in Timings.__struct_fields__:
            setattr(total, name, getattr(total, name) + getattr(part, name))
    return total


def decode_settings(settings: EngineSettings) -> DecodeSettings:
    return DecodeSettings(
        max_new_tokens=settings.max_new_tokens,
        max_input_tokens=settings.max_input_tokens,
        labels_per_prompt=settings.labels_per_prompt,
        confidence_threshold=settings.confidence_threshold,
        entropy_threshold=settings.entropy_threshold,
    )


@dataclass
class Prepared:
    """A document's prompts and, when its decoding is constrained, one grammar per prompt."""

    encoded: EncodedDocument
    grammars: list[RowGrammar] | None


class ExtractionFlow:
    """extract() for an engine that says how it generates: `generate` (every prompt of the prepared
    documents) and `continue_greedy` (the validation loop's re-decodes)."""

    info: ModelInfo

    def __init__(self, tokenizer: PreTrainedTokenizerBase, settings: EngineSettings, device) -> None:
        self.tokenizer = tokenizer
        self.settings = settings
        self.eos_id = int(tokenizer.eos_token_id)
        self.pad_id = int(tokenizer.pad_token_id)
        vocab = TokenBytes.from_tokenizer(tokenizer)
        self.constrainer = Constrainer(vocab, self.eos_id, device)
        self.decode = Detokenizer(tokenizer, vocab)

    def prepare(self, docs: Sequence[Document], timings: Timings) -> list[Prepared]:
        """Prompts tokenised and grammars built (timed as tokenize_ms: the inputs' preparation)."""
        started = time.perf_counter()
        prepared = []
        for doc in docs:
            encoded = encode_prompts(
                self.tokenizer, doc, self.settings.labels_per_prompt, self.settings.max_input_tokens
            )
            grammars = self.constrainer.for_document(doc, encoded.text, encoded.chunks, self.settings.constrained)
            prepared.append(Prepared(encoded, grammars))
        timings.tokenize_ms += ms_since(started)
        return prepared

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        timings = Timings()
        prepared = self.prepare(docs, timings)
        generations = self.generate(prepared, timings)
        started = time.perf_counter()
        retries = revisit(
            docs,
            [p.encoded.chunks for p in prepared],
            [p.encoded.prompts for p in prepared],
            generations,
            self.decode,
            lambda d, c: prepared[d].grammars[c] if prepared[d].grammars else None,
            lambda requests: self.continue_greedy(requests, timings),
            self.settings.max_new_tokens,
        )
        timings.decode_ms += ms_since(started)
        started = time.perf_counter()
        extractions = [
            interpret(
                doc, p.encoded.chunks, generations[i], self.decode, self.settings, p.encoded.truncated, retries[i]
            )
            for i, (doc, p) in enumerate(zip(docs, prepared, strict=True))
        ]
        timings.postprocess_ms = ms_since(started)
        tokens = sum(len(g.token_ids) for doc in generations for g in doc)
        return BatchResult(extractions=extractions, timings=timings, generated_tokens=tokens)

    def generate(self, prepared: list[Prepared], timings: Timings) -> list[list[Generation]]:
        """Per document, one greedy generation per prompt."""
        raise NotImplementedError

    def continue_greedy(self, requests: list[Continuation], timings: Timings) -> list[Generation]:
        """Greedy continuations of prompts extended by kept tokens (the validation loop's re-decodes)."""
        raise NotImplementedError
