"""The array grammar on the host (model/grammar/mask.py's GrammarBatch) behind the Grammar protocol:
the oracle the device grammar is held to, and the grammar the copy drafts' proposer reads."""

from __future__ import annotations

import numpy as np
import torch

from model.grammar.mask import GrammarBatch, State


class HostGrammar:
    """`batch` over `rows` batch rows (those past its own are free), masks `width` tokens wide."""

    def __init__(self, batch: GrammarBatch, rows: int, width: int) -> None:
        self.batch = batch
        self.rows = rows
        self.width = width

    def start(self) -> State:
        return self.batch.state.take(np.arange(len(self.batch.rows)))

    def legal(self, state: State) -> tuple[torch.Tensor, torch.Tensor]:
        self.batch.state = state
        shape = torch.empty(1, 1, device=self.batch.device).expand(self.rows, self.width)
        return self.batch.legal(shape)

    def advance(self, state: State, tokens: torch.Tensor) -> State:
        self.batch.state = state.take(np.arange(len(state.row)))
        self.batch.advance(tokens)
        return self.batch.state
