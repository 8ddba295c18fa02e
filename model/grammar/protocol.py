"""What a decode loop asks of a batch's grammar, whichever implements it: the device grammar
(model/grammar/device.py) or a host one (model/grammar/host.py over the array grammar, ops/oracle
over the byte automaton: the oracle the tests hold both to); and what a runner asks of the builder
that compiles one for a batch of prompts (model/grammar/constrainer.py, or the oracle's).

The state is the implementation's own and is never changed in place: a loop keeps the one it is
at, and may step ahead from it and drop what it tried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

import torch

from model.grammar.source import WordEdges
from model.grammar.token_bytes import TokenBytes

State = TypeVar("State")
# One prompt's grammar as the builder compiled it (its document's and label chunk's tables): opaque
# to everyone else, who hands it back to the builder to compile a batch.
Row = Any


class Grammar(Protocol[State]):
    def start(self) -> State:
        """Every row's state before its first generated token (after the tokens it was fed)."""
        ...

    def legal(self, state: State) -> tuple[torch.Tensor, torch.Tensor]:
        """([B, width] on the device: the tokens each row may take; [B] bool: exactly one). The mask is
        bool (True: legal) or additive float32 (0.0: legal, -inf: not), as is cheaper to apply where it
        is built: read it with model/signals.py's `allowed` and apply it with its `masked`."""
        ...

    def advance(self, state: State, tokens: torch.Tensor) -> State:
        """The rows' state after each took its token [B]."""
        ...


class GrammarBuilder(Protocol):
    """Compiles prompts' grammars (once per document and label chunk) and a batch's from them."""

    tokens: TokenBytes  # the vocabulary's bytes, which detokenising reads too
    eos_id: int

    def rows(
        self,
        text: str,
        chunks: Sequence[tuple[str, ...]],
        types: Mapping[str, str] | None = None,
        edges: WordEdges | None = None,
    ) -> list[Row]:
        """One grammar per label chunk of a document whose source is `text`."""
        ...

    def grammar(
        self, rows: Sequence[Row | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> Grammar:
        """A batch's grammar: `batch_rows` rows (those past `rows`, and None ones, free), each fed its
        prefix first, masks `width` tokens wide."""
        ...

    def forget_documents(self) -> None:
        """Drop the documents' tables kept for the validation loop (a benchmark's run starts cold)."""
        ...
