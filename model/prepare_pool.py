"""A batch's documents prepared (model/engine.py's `prepare`: prompts tokenised, word edges, source
tables) in processes beside the engine's own, in parallel.

Preparation is Python and numpy work, one document at a time under the GIL (jieba's segmentation, the
grammar's source tables: several milliseconds a document, ops/BENCHMARKS.md). A prepare-ahead thread
overlaps it with the decode loop but cannot spread it over cores, and beside an accelerator that one
core can set the pace. `PreparePool` cuts a batch into contiguous shares of about equal text,
prepares the first itself and sends the rest to its processes (spawned, each with the engine's
tokenizer and settings and its own grammar builder). Preparation is a pure function of the document
and the vocabulary, so the result is what one process prepares (tests/test_prepare_pool.py); the
chunk tables, source tables and words that come back are taken into the engine's, so a batch's rows
share its chunk tables and the validation loop and the checks find each document's as they would
without a pool (a process keeps no text's: it sees none twice). Off by default: on a 2-core CPU,
where decoding takes the other core, it did not pay through Kafka (ops/BENCHMARKS.md).

A share that fails in a process (the process died, or a document raised) is prepared again in the
engine's process: a broken pool is not used again, and a document's own error is raised from there,
where the caller isolates the culprit as it does without a pool. A preparing process ends with the
engine's process, however that ends: a killed worker leaves none behind.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from model.answers.prompt import EncodedDocument
from model.answers.words import Words, load_segmenters, words_of
from model.config import EngineSettings
from model.engine import Prepared, Preparer, prepare
from model.grammar.constrainer import Constrainer, new_constrainer
from schemas.messages import Document

log = logging.getLogger(__name__)


@dataclass
class _ProcessPreparer:
    settings: EngineSettings
    tokenizer: PreTrainedTokenizerBase
    constrainer: Constrainer


_preparer: _ProcessPreparer | None = None  # a pool process's own


def _start(settings: EngineSettings, tokenizer: PreTrainedTokenizerBase) -> None:
    global _preparer
    _end_with_the_engine()
    torch.set_num_threads(1)  # numpy and Python work: no process's threads crowd the engine's
    _preparer = _ProcessPreparer(settings, tokenizer, new_constrainer(tokenizer, torch.device("cpu")))
    load_segmenters()
    # What the process loaded (torch, transformers, jieba's dictionaries) out of the collector's full
    # passes, as the engine's process does (model/build.py): else each walks it in the middle of a share.
    gc.collect()
    gc.freeze()


def _end_with_the_engine() -> None:
    """End this process when the engine's ends, however it ends. A process of a worker killed with
    SIGKILL (or by the OOM killer) would otherwise wait on its call queue forever, holding its memory:
    it holds the queue's write end too, so it never reads an end of file. The parent's sentinel is
    ready once the parent is gone."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="engine-watch", daemon=True).start()


def _prepare_share(
    docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None
) -> tuple[list[Prepared], dict[str, Words]]:
    """The share prepared, and the words of the texts it segmented, which the engine's checks read too."""
    assert _preparer is not None, "a pool process prepares after its initializer ran"
    prepared = prepare(_preparer, docs, encoded)
    texts = {p.encoded.text for p in prepared}
    words = {text: known for text in texts if (known := words_of.get(text)) is not None}
    # The engine keeps the texts' words and tables now; this process sees no text twice.
    words_of.cache_clear()
    _preparer.constrainer.forget_documents()
    return prepared, words


class PreparePool:
    """`processes` spawned processes preparing documents for engines over `tokenizer` and `settings`."""

    def __init__(self, settings: EngineSettings, tokenizer: PreTrainedTokenizerBase, processes: int) -> None:
        self.processes = processes
        self.share_chars = settings.prepare_share_chars
        # Spawned, not forked: the engine's process holds torch's threads and the model's memory.
        spawn = multiprocessing.get_context("spawn")
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            processes, mp_context=spawn, initializer=_start, initargs=(settings, tokenizer)
        )
        # Every process started and loaded now, as the engine's model is: not in the first batch. A
        # process that fails to start breaks the pool, and the engine's build with it, saying why.
        seen: set[int] = set()
        while len(seen) < processes:
            seen |= {ready.result() for ready in [self._pool.submit(_ready) for _ in range(processes)]}

    def prepare(
        self, preparer: Preparer, docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None = None
    ) -> list[Prepared]:
        """`prepare(preparer, docs, encoded)`, its shares in parallel; `preparer` prepares the first."""

        def here(lo: int, hi: int) -> list[Prepared]:
            return prepare(preparer, docs[lo:hi], encoded[lo:hi] if encoded is not None else None)

        sizes = [len(doc.text) for doc in docs]
        cuts = _shares(sizes, 1 + self.processes if self._pool is not None else 1, self.share_chars)
        sent = [(lo, hi, self._send(docs[lo:hi], None if encoded is None else encoded[lo:hi])) for lo, hi in cuts[1:]]
        out = here(*cuts[0])
        for lo, hi, future in sent:
            done = self._collect(future) if future is not None else None
            # Where the process failed it, the share is prepared here (a document's error raised here).
            share, words = done if done is not None else (here(lo, hi), {})
            for text, known in words.items():
                words_of.remember(text, known)
            out += [_adopted(preparer, p) for p in share]
        return out

    def _send(
        self, docs: Sequence[Document], encoded: Sequence[EncodedDocument | None] | None
    ) -> Future[tuple[list[Prepared], dict[str, Words]]] | None:
        if self._pool is None:
            return None
        try:
            return self._pool.submit(_prepare_share, docs, encoded)
        except BrokenProcessPool:
            self._broken()
            return None

    def _collect(
        self, future: Future[tuple[list[Prepared], dict[str, Words]]]
    ) -> tuple[list[Prepared], dict[str, Words]] | None:
        """A share's result; None where its process failed it."""
        try:
            return future.result()
        except BrokenProcessPool:
            self._broken()
            return None
        except Exception:
            return None

    def _broken(self) -> None:
        if self._pool is not None:
            log.warning("a preparing process died: documents are prepared in the engine's process from now on")
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> PreparePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ready() -> int:
    time.sleep(0.05)  # long enough that one process cannot take every call while the others start
    return os.getpid()


def _shares(sizes: Sequence[int], parts: int, least: int = 1) -> list[tuple[int, int]]:
    """[lo, hi) of at most `parts` contiguous shares of items of `sizes`, about equal in total size
    (a document's preparation grows with its text), none empty, and no more shares than the total
    size holds `least`s (a batch with less text than two is one share)."""
    n = len(sizes)
    if n == 0:
        return [(0, 0)]
    parts = max(1, min(parts, n, sum(sizes) // least))
    ends = list(itertools.accumulate(max(1, size) for size in sizes))
    cuts = [0]
    for i in range(1, parts):
        # The share ends with the item that crosses its part of the total; each later share keeps one.
        at = bisect.bisect_left(ends, ends[-1] * i / parts) + 1
        cuts.append(min(max(at, cuts[-1] + 1), n - (parts - i)))
    cuts.append(n)
    return list(itertools.pairwise(cuts))


def _adopted(preparer: Preparer, prepared: Prepared) -> Prepared:
    """A document prepared elsewhere, its grammars over the engine's own chunk and source tables."""
    constrainer = preparer.constrainer
    if prepared.grammars is None or not isinstance(constrainer, Constrainer):
        return prepared
    return Prepared(prepared.encoded, constrainer.adopt(prepared.encoded.text, prepared.grammars))
