"""Builds the answer grammar: per engine the vocabulary's tables once, per label chunk its literal
tables once, per document its source tables once (model/grammar/source.py, word edges included),
and per batch the compiled grammar the decode loop steps through the Grammar protocol
(model/grammar/protocol.py): the device one (model/grammar/device.py) or the host one
(model/grammar/host.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from transformers import PreTrainedTokenizerBase

from model.grammar.device import DeviceGrammar
from model.grammar.host import HostGrammar, HostTables
from model.grammar.layout import RowGrammar, build_layout
from model.grammar.literal import ChunkTable, TokenRuns, build_chunk_table
from model.grammar.protocol import Grammar
from model.grammar.source import CHECKED_TYPES, SourceTables, WordEdges, may_end, prepare_source
from model.grammar.tables import device_tables
from model.grammar.token_bytes import TokenBytes
from model.grammar.vocab import VocabIndex
from schemas.field_sets import FieldType

# Documents whose tables stay built: a few micro-batches' worth (the validation loop asks again).
SOURCES_KEPT = 128


class Constrainer:
    """Per engine: the vocabulary's tables once, each chunk's literal tables once, each document's
    source tables once (the validation loop asks again for the documents of the batch in hand)."""

    def __init__(self, vocab: TokenBytes, eos_id: int, device: torch.device, index: VocabIndex | None = None) -> None:
        self.tokens = vocab
        self.vocab = index or VocabIndex(vocab)
        self.eos_id = eos_id
        self.device = device
        # The decode loop's grammar: the device one or the host one; None picks by the device.
        self.grammar_on_device: bool | None = None
        self._chunks: dict[tuple[str, ...], ChunkTable] = {}
        self._runs = TokenRuns(vocab)  # shared by every chunk: labels recur across label subsets
        self._sources: dict[str, SourceTables] = {}

    def rows(
        self,
        text: str,
        chunks: Sequence[tuple[str, ...]],
        types: Mapping[str, FieldType] | None = None,
        edges: WordEdges | None = None,
    ) -> list[RowGrammar]:
        """One row per chunk of `text`; a label's values are held to its checked type or, for a
        name-like label, to the word edges `edges` gives it (the same for every call with `text`)."""
        source = self._sources.get(text)
        if source is None or (edges is not None and not edges.tables.keys() <= source.ends.keys()):
            source = self._keep(text, prepare_source(text, self.vocab, edges))
        types = types or {}
        classes = edges.classes if edges is not None else {}
        out = []
        for labels in chunks:
            chunk = self._chunks.get(labels)
            if chunk is None:
                chunk = self._chunks[labels] = build_chunk_table(labels, self._runs)
            kinds = tuple(t if (t := types.get(label)) in CHECKED_TYPES else classes.get(label) for label in labels)
            out.append(RowGrammar(source, chunk, kinds))
        # A checked type's reach and ends now, with the rest of the document's preparation (ahead of
        # the batch, or in a preparing process), not when a batch's layout first asks for them.
        for kind in sorted({k for row in out for k in row.types if k in CHECKED_TYPES}):
            may_end(source, kind, self.vocab.lengths)
        return out

    def adopt(self, text: str, rows: Sequence[RowGrammar]) -> list[RowGrammar]:
        """A document's rows built by a constrainer over the same vocabulary in another process (one
        preparing documents, model/prepare_pool.py), over this one's chunk tables, its source tables
        kept here as if `rows` had built them: a batch's rows share chunk tables, and the validation
        loop finds the document's."""
        if not rows:
            return []
        source = self._keep(text, rows[0].source)
        return [RowGrammar(source, self._chunks.setdefault(r.chunk.labels, r.chunk), r.types) for r in rows]

    def forget_documents(self) -> None:
        self._sources.clear()

    def _keep(self, text: str, source: SourceTables) -> SourceTables:
        if text not in self._sources and len(self._sources) >= SOURCES_KEPT:
            del self._sources[next(iter(self._sources))]  # the oldest: batches come in order
        self._sources[text] = source
        return source

    def grammar(
        self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> Grammar:
        """The decode loop's grammar of a batch of `batch_rows` rows (those past `rows` pad it: free),
        its rows fed `prefixes`, masking `width` tokens (the model's vocabulary): on an accelerator
        the device grammar, which never waits for the host; on a CPU, where there is nothing to wait
        for, the host grammar, whose compiled steps cost a fraction of the device grammar's ~150 small
        torch operations (tests/test_device_grammar.py holds the two to the same tokens)."""
        on_device = self.device.type != "cpu" if self.grammar_on_device is None else self.grammar_on_device
        if not on_device:
            return self.host_grammar(rows, prefixes, batch_rows, width)
        return self.device_grammar(rows, prefixes, batch_rows, width)

    def host_grammar(
        self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> HostGrammar:
        """The host grammar, its masks on this constrainer's device (arguments as `grammar`'s)."""
        rows = [*rows, *[None] * (batch_rows - len(rows))]
        layout = build_layout(rows, self.vocab, torch.device("cpu"))
        return HostGrammar(HostTables(layout, self.vocab, self.eos_id), width, self.device, prefixes)

    def device_grammar(
        self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> DeviceGrammar:
        """The device grammar, whatever the device (arguments as `grammar`'s)."""
        rows = [*rows, *[None] * (batch_rows - len(rows))]
        layout = build_layout(rows, self.vocab, self.device)
        return DeviceGrammar(device_tables(layout, self.vocab, self.eos_id, width, self.device), prefixes)


def new_constrainer(tokenizer: PreTrainedTokenizerBase, device: torch.device) -> Constrainer:
    """A runner's grammar builder over its tokenizer's vocabulary, its tables on the runner's device."""
    return Constrainer(TokenBytes.from_tokenizer(tokenizer), int(tokenizer.eos_token_id), device)
