"""What the pipeline asks of an extraction engine, and the extraction flow as plain functions:
prepare (prompts and grammars) -> generate (the runner) -> revisit (re-decode failing values) ->
interpret. Runners differ only in how they generate (model/runner/protocol.py); `Extractor` strings
the functions together over one runner, as two calls: `prepare` (host work, no model) and `run`
(the decode loop and what follows), so a caller can prepare batch t+1 while batch t decodes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from transformers import PreTrainedTokenizerBase

from model.answers.backoff import BackoffCost
from model.answers.checks import word_edges
from model.answers.prompt import EncodedDocument, encode_prompts
from model.answers.retry import revisit
from model.answers.validate import Detokenizer, Extraction, interpret
from model.clock import ms_since
from model.config import EngineSettings
from model.grammar.protocol import GrammarBuilder, Row
from model.runner.protocol import Generated, Passes, Request, Runner
from model.signals import Generation
from schemas.messages import Document, ModelInfo, Timings


@dataclass
class BatchResult:
    extractions: list[Extraction]
    timings: Timings = field(default_factory=Timings)
    generated_tokens: int = 0
    passes: Passes = field(default_factory=Passes)
    # The lexicon backoff's share of the batch, where it ran (model/windows/engine.py).
    backoff: BackoffCost | None = None


class Engine(Protocol):
    info: ModelInfo

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        """One `Extraction` per document, in order. May raise; the caller isolates the culprit."""
        ...


@runtime_checkable
class PreparingEngine(Engine, Protocol):
    """An engine whose host preparation is a separate call: `extract(d) == run(prepare(d))`."""

    def prepare(
        self, docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None = None
    ) -> PreparedBatch: ...

    def run(self, batch: PreparedBatch) -> BatchResult: ...


@dataclass
class Prepared:
    """A document's prompts and, when its decoding is constrained, one grammar per prompt."""

    encoded: EncodedDocument
    grammars: list[Row] | None

    def grammar(self, chunk: int) -> Row | None:
        return self.grammars[chunk] if self.grammars else None


class Preparer(Protocol):
    """What preparing needs: a runner has it, and so has a preparing process (model/prepare_pool.py)."""

    settings: EngineSettings
    tokenizer: PreTrainedTokenizerBase
    constrainer: GrammarBuilder


class PrepareFunction(Protocol):
    def __call__(
        self, preparer: Preparer, docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None = None
    ) -> list[Prepared]: ...


def prepare(
    preparer: Preparer, docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None = None
) -> list[Prepared]:
    """Prompts tokenised and grammars built, with the runner's tokenizer and constrainer. A document's
    prompts already tokenised by the caller (`encoded`, with the same tokenizer) are not tokenised again."""
    settings = preparer.settings
    prepared = []
    for i, doc in enumerate(docs):
        given = encoded[i] if encoded is not None else None
        prompts = given or encode_prompts(
            preparer.tokenizer, doc, settings.labels_per_prompt, settings.max_input_tokens
        )
        grammars = document_grammars(preparer.constrainer, doc, prompts.text, prompts.chunks, settings.constrained)
        prepared.append(Prepared(prompts, grammars))
    return prepared


def document_grammars(
    constrainer: GrammarBuilder, doc: Document, text: str, chunks: Sequence[tuple[str, ...]], constrained: bool
) -> list[Row] | None:
    """One grammar per prompt of `doc` (its source `text`, as the prompts carry it), or None where its
    decoding is free: the constraint is off, or the task is classification, whose answer is not
    copied from the text. Name-like labels' values start and end on the text's word edges."""
    if not constrained or doc.task != "extract":
        return None
    edges = word_edges(text, doc.labels, doc.field_types)
    return constrainer.rows(text, chunks, doc.field_types, edges)


def generate(runner: Runner, prepared: Sequence[Prepared]) -> tuple[list[list[Generation]], Generated]:
    """Per document, one greedy generation per prompt; and what the runner's call took."""
    requests = [
        Request(prompt, p.grammar(c), doc=d)
        for d, p in enumerate(prepared)
        for c, prompt in enumerate(p.encoded.prompts)
    ]
    generated = runner.generate(requests)
    per_doc: list[list[Generation]] = [[] for _ in prepared]
    for request, generation in zip(requests, generated.generations, strict=True):
        per_doc[request.doc].append(generation)
    return per_doc, generated


@dataclass
class PreparedBatch:
    """A batch's documents with their prompts and grammars; what `prepare` hands to `run`."""

    docs: Sequence[Document]
    prepared: list[Prepared]
    tokenize_ms: float


class Extractor:
    """An `Engine` over one runner: the flow's functions in order, each stage timed where it runs."""

    def __init__(self, runner: Runner, prepare_with: PrepareFunction = prepare) -> None:
        """`prepare_with`: `prepare`, or a pool's (model/prepare_pool.py), which prepares the same."""
        self.runner = runner
        self.prepare_with = prepare_with
        self.info = runner.info
        self.settings = runner.settings
        self.detokenize = Detokenizer(runner.tokenizer, runner.constrainer.tokens)

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        return self.run(self.prepare(docs))

    def prepare(
        self, docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None = None
    ) -> PreparedBatch:
        """Host work only (tokenising, grammar tables): safe on another thread while `run` decodes."""
        started = time.perf_counter()
        prepared = self.prepare_with(self.runner, docs, encoded)
        return PreparedBatch(docs, prepared, ms_since(started))

    def run(self, batch: PreparedBatch) -> BatchResult:
        docs, prepared = batch.docs, batch.prepared
        generations, first = generate(self.runner, prepared)
        redecodes: list[Generated] = []

        def redecode(requests: list[Request]) -> list[Generation]:
            redecodes.append(self.runner.generate(requests))
            return redecodes[-1].generations

        started = time.perf_counter()
        retries = revisit(
            docs,
            [p.encoded.chunks for p in prepared],
            [p.encoded.prompts for p in prepared],
            generations,
            self.detokenize,
            lambda d, c: prepared[d].grammar(c),
            redecode,
            self.settings.max_new_tokens,
        )
        revisit_ms = ms_since(started)
        started = time.perf_counter()
        extractions = [
            interpret(
                doc, p.encoded.chunks, generations[i], self.detokenize, self.settings, p.encoded.truncated, retries[i]
            )
            for i, (doc, p) in enumerate(zip(docs, prepared, strict=True))
        ]
        postprocess_ms = ms_since(started)
        spent = sum(redecodes, first)
        # The validation loop is decoding too: its wall time, re-decodes included, counts as decode.
        redecode_prefill_ms = sum(r.prefill_ms for r in redecodes)
        timings = Timings(
            tokenize_ms=batch.tokenize_ms,
            prefill_ms=spent.prefill_ms,
            decode_ms=first.decode_ms + revisit_ms - redecode_prefill_ms,
            constrain_ms=spent.constrain_ms,
            postprocess_ms=postprocess_ms,
        )
        tokens = sum(len(g.token_ids) for doc in generations for g in doc)
        return BatchResult(extractions=extractions, timings=timings, generated_tokens=tokens, passes=spent.passes)
