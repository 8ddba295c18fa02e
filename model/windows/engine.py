"""Any engine, reading documents of any length: split into windows, extract them all, merge.

A layer around the engine (`build_engine` puts it around every engine it builds), so the engine's
inside is the same for a window as for a short document: constraint, validation loop, signals,
prefix sharing among a window's label chunks. A document that fits the model's window is
passed through untouched, and its extraction comes back as the engine made it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from transformers import PreTrainedTokenizerBase

from model.answers.backoff import Backoff
from model.answers.checks import document_reasons
from model.answers.prompt import (
    BOUNDARY_SLACK,
    EncodedDocument,
    encode_if_short,
    fits,
    prompt_chunks,
    prompt_overhead,
    token_ends,
)
from model.answers.validate import Extraction
from model.clock import ms_since, sum_timings
from model.config import EngineSettings
from model.engine import BatchResult, Engine, PreparingEngine
from model.runner.protocol import Passes
from model.windows.merge import merge_windows
from model.windows.split import Window, WindowSettings, split_text
from schemas.field_sets import single_value_labels
from schemas.messages import Document, Timings


def schedule(window_counts: Sequence[int], budget: int) -> list[list[tuple[int, int]]]:
    """(document, window) pairs per call of the engine inside, at most `budget` per call.

    Every document's first window comes before any document's second, so the short documents of a
    batch are never queued behind a long one's windows; after those, each long document's further
    windows follow in document order, together in one call where they fit.
    """
    order = [(d, 0) for d, count in enumerate(window_counts) if count]
    order += [(d, w) for d, count in enumerate(window_counts) for w in range(1, count)]
    budget = max(budget, 1)
    return [order[i : i + budget] for i in range(0, len(order), budget)]


@dataclass
class WindowedBatch:
    """A batch's windows and the inner engine's calls over them, prepared: what `prepare` hands to `run`.
    `inputs` holds per call the inner engine's prepared batch, or the window documents where it does
    not prepare (a replica pool)."""

    docs: Sequence[Document]
    plans: list[list[Window]]
    calls: list[list[tuple[int, int]]]
    inputs: list[object]
    split_ms: float


class WindowedEngine:
    """An `Engine` that reads each document whole, in as many windows as it takes.

    Attributes it does not have itself are the inner engine's (tests and benchmarks reach its parts).
    """

    def __init__(
        self,
        inner: Engine,
        tokenizer: PreTrainedTokenizerBase,
        settings: EngineSettings,
        windows: WindowSettings,
        backoff: Backoff | None = None,
    ) -> None:
        self.inner = inner
        # Run once per batch on the merged records (model/answers/backoff.py); None: no backoff.
        self.backoff = backoff
        self.info = inner.info
        self.tokenizer = tokenizer
        self.settings = settings
        self.window_settings = windows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def windows_of(self, doc: Document) -> tuple[list[Window], EncodedDocument | None]:
        """The windows `doc` is read in: one, the whole text, when every chunk's prompt holds it; then
        also its prompts, tokenised once here for the engine inside (most documents take this way)."""
        limit = self.settings.max_input_tokens
        whole = [Window(0, len(doc.text), 0, len(doc.text))]
        chunks = prompt_chunks(doc, self.settings.labels_per_prompt)
        encoded = encode_if_short(self.tokenizer, doc, chunks, limit)
        if encoded is not None:
            return whole, encoded
        # Near or past the window: the text is tokenised alone once, for the fit and for the cuts.
        ends = token_ends(self.tokenizer, doc.text)
        overhead = prompt_overhead(self.tokenizer, doc.task, chunks)
        if overhead + len(ends) <= limit:
            return whole, None
        budget = limit - overhead - BOUNDARY_SLACK
        while True:
            windows = split_text(doc.text, ends, budget, self.window_settings.overlap_tokens)
            # A window re-tokenised on its own may take a token more at a cut; then all shrink a little.
            if budget <= BOUNDARY_SLACK or all(
                fits(self.tokenizer, doc.text[w.start : w.end], doc.task, chunks, limit) for w in windows
            ):
                return windows, None
            budget -= BOUNDARY_SLACK

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        return self.run(self.prepare(docs))

    def prepare(self, docs: Sequence[Document]) -> WindowedBatch:
        """The windows and the inner engine's calls, each prepared where the inner engine prepares:
        host work only, so a worker may prepare batch t+1 while batch t runs."""
        started = time.perf_counter()
        read = [self.windows_of(doc) for doc in docs]
        plans, encoded = [windows for windows, _ in read], [prompts for _, prompts in read]
        calls = schedule([len(p) for p in plans], self.window_settings.windows_per_batch)
        inputs: list[object] = []
        for call in calls:
            window_docs = [_window_document(docs[d], plans[d], w) for d, w in call]
            if isinstance(self.inner, PreparingEngine):
                inputs.append(self.inner.prepare(window_docs, [encoded[d] for d, _ in call]))
            else:
                inputs.append(window_docs)
        # The inner engine times its own preparation; the split is counted here.
        return WindowedBatch(docs, plans, calls, inputs, ms_since(started))

    def run(self, batch: WindowedBatch) -> BatchResult:
        docs, plans = batch.docs, batch.plans
        parts: dict[tuple[int, int], Extraction] = {}
        timings: list[Timings] = []
        generated = 0
        passes = Passes()
        for call, given in zip(batch.calls, batch.inputs, strict=True):
            inner = self.inner
            result = inner.run(given) if isinstance(inner, PreparingEngine) else inner.extract(given)
            parts.update(zip(call, result.extractions, strict=True))
            timings.append(result.timings)
            generated += result.generated_tokens
            passes += result.passes
        started = time.perf_counter()
        extractions = [
            parts[d, 0] if len(plan) == 1 else self._merge(doc, plan, [parts[d, w] for w in range(len(plan))])
            for d, (doc, plan) in enumerate(zip(docs, plans, strict=True))
        ]
        total = sum_timings(timings)
        total.tokenize_ms += batch.split_ms
        total.postprocess_ms += ms_since(started)
        cost = None
        if self.backoff is not None:
            cost = self.backoff(docs, extractions)
            total.backoff_ms += cost.lexicon_ms + cost.score_ms
        return BatchResult(extractions, total, generated, passes, cost)

    def _merge(self, doc: Document, windows: list[Window], parts: list[Extraction]) -> Extraction:
        single = single_value_labels(doc.field_set)
        merged = merge_windows(doc.doc_id, doc.labels, windows, parts, single, self.settings, self._decode)
        # The document checks judge the whole text's record; each window's own were dropped in the merge.
        merged.reasons += document_reasons(doc, merged.fields)
        return merged

    def _decode(self, token_ids: Sequence[int]) -> str:
        """Token ids to text, as the engines' alarms spell their tokens (model/answers/validate.py)."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


def _window_document(doc: Document, windows: list[Window], index: int) -> Document:
    if len(windows) == 1:
        return doc
    window = windows[index]
    return msgspec.structs.replace(doc, text=doc.text[window.start : window.end])
