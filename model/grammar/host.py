"""The answer grammar on the host, behind the Grammar protocol (model/grammar/protocol.py): every row's
state in numpy arrays, and two pure functions over a batch's layout (model/grammar/layout.py),
`legal_mask` and `advance`, as model/grammar/step.py has them on the device, walked row by row in
compiled loops (model/grammar/host_step.py). On a CPU it is the decode
loop's grammar where it is the faster of the two, and the reference runner's; tests hold the device
grammar to it token set by token set (tests/test_device_grammar.py).

A row's state is small: a literal state of its chunk's tables (model/grammar/literal.py), a bit mask
of the labels answered, and, inside a value, the value's label, its length in bytes and the source
positions where it may end (one flat list for the batch, sorted by row).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.grammar import host_step
from model.grammar.layout import Layout
from model.grammar.vocab import VocabIndex


@dataclass(frozen=True)
class HostState:
    literal: np.ndarray  # [B] global literal state, -1 where none is possible
    answered: np.ndarray  # [B]
    label: np.ndarray  # [B] the open value's label (chunk index), -1 where no value is open
    length: np.ndarray  # [B] the open value's bytes so far
    ended: np.ndarray  # [B] bool
    end_row: np.ndarray  # the open values' end positions: (row, global position), sorted by row
    end_pos: np.ndarray

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The fields in order, as the compiled step takes them."""
        return (self.literal, self.answered, self.label, self.length, self.ended, self.end_row, self.end_pos)


@dataclass(frozen=True)
class HostTables:
    """A batch's layout with what stepping it needs besides: the vocabulary and end-of-sequence."""

    layout: Layout
    vocab: VocabIndex
    eos_id: int

    @functools.cached_property
    def kernel(self) -> host_step.Kernel:
        return host_step.kernel_of(self.layout, self.vocab.lengths, self.vocab.size, self.eos_id)


def start_state(tables: HostTables) -> HostState:
    t = tables.layout
    n = len(t.rows)
    return HostState(
        literal=np.where(t.free, -1, t.state_offset),
        answered=np.zeros(n, dtype=np.int64),
        label=np.full(n, -1, dtype=np.int64),
        length=np.zeros(n, dtype=np.int64),
        ended=np.zeros(n, dtype=bool),
        end_row=np.zeros(0, dtype=np.int64),
        end_pos=np.zeros(0, dtype=np.int64),
    )


class HostGrammar:
    """The host grammar of a batch of `len(tables.layout.rows)` rows (padding rows free), masking
    `width` tokens (the model's vocabulary) on `device`; its rows first fed `prefixes`."""

    def __init__(
        self, tables: HostTables, width: int, device: torch.device, prefixes: Sequence[Sequence[int]] = ()
    ) -> None:
        self.tables = tables
        self.width = width
        self.device = device
        state = start_state(tables)
        n = len(tables.layout.rows)
        for step in range(max((len(p) for p in prefixes), default=0)):
            going = np.array([len(p) > step for p in prefixes] + [False] * (n - len(prefixes)))
            tokens = [p[step] if len(p) > step else tables.eos_id for p in prefixes]
            tokens = np.array(tokens + [tables.eos_id] * (n - len(prefixes)), dtype=np.int64)
            state = advance(tables, state, tokens, going)
        self._start = state

    def start(self) -> HostState:
        return self._start

    def legal(self, state: HostState) -> tuple[torch.Tensor, torch.Tensor]:
        # On a CPU the additive mask: applying a bool mask there (masked_fill_) costs ten times the
        # float addition per entry. An accelerator gets the bool one, a quarter of the bytes to copy.
        mask, forced = legal_mask(self.tables, state, self.width, additive=self.device.type == "cpu")
        return mask.to(self.device), torch.from_numpy(forced).to(self.device)

    def advance(self, state: HostState, tokens: torch.Tensor) -> HostState:
        return advance(self.tables, state, tokens.cpu().numpy().astype(np.int64))


def legal_mask(
    tables: HostTables, state: HostState, width: int, additive: bool = False
) -> tuple[torch.Tensor, np.ndarray]:
    """([B, width]: the tokens each row may take, as a bool mask or, `additive`, a float32 one of 0.0
    where legal and -inf elsewhere (model/grammar/protocol.py); [B] bool: exactly one was legal).
    Rows left with nothing legal (a dead end the grammar cannot reach, kept for safety) may end; rows
    without a grammar (padding) are free. Built in numpy and handed over without a copy."""
    n = len(state.literal)
    forced = np.zeros(n, dtype=bool)
    if additive:
        legal = np.full((n, width), -np.inf, dtype=np.float32)
        host_step.legal_mask(tables.kernel, *state.arrays(), legal, forced, np.float32(0.0))
    else:
        legal = np.zeros((n, width), dtype=bool)
        host_step.legal_mask(tables.kernel, *state.arrays(), legal, forced, True)
    return torch.from_numpy(legal), forced


def advance(tables: HostTables, state: HostState, tokens: np.ndarray, going: np.ndarray | None = None) -> HostState:
    """The rows' state after each took its token [B] (a legal one: the caller masked); only the rows
    marked in `going` [B] move, where it is given."""
    going = np.ones(len(tokens), dtype=bool) if going is None else going
    return HostState(*host_step.advance(tables.kernel, *state.arrays(), tokens, going))
