"""The product's grammar: a batch's tables on the engine's device (model/grammar/tables.py) and the
pure step functions (model/grammar/step.py), behind the Grammar protocol."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from model.grammar.state import DeviceState, start_state
from model.grammar.step import advance, legal
from model.grammar.tables import DeviceTables


class DeviceGrammar:
    def __init__(self, tables: DeviceTables, prefixes: Sequence[Sequence[int]] = ()) -> None:
        self.tables = tables
        self._start = self._fed(start_state(tables), prefixes)

    def start(self) -> DeviceState:
        return self._start

    def legal(self, state: DeviceState) -> tuple[torch.Tensor, torch.Tensor]:
        return legal(self.tables, state)

    def advance(self, state: DeviceState, tokens: torch.Tensor) -> DeviceState:
        return advance(self.tables, state, tokens)

    def _fed(self, state: DeviceState, prefixes: Sequence[Sequence[int]]) -> DeviceState:
        """`state` after each row's prefix (a re-decode's kept tokens); rows whose prefix is shorter
        stay where they are. Preparation: the prefixes are on the host anyway."""
        device = state.ended.device
        for step in range(max((len(p) for p in prefixes), default=0)):
            going = [len(p) > step for p in prefixes] + [False] * (self.tables.rows - len(prefixes))
            tokens = [p[step] if len(p) > step else self.tables.eos_id for p in prefixes]
            tokens += [self.tables.eos_id] * (self.tables.rows - len(prefixes))
            moved = advance(self.tables, state, torch.tensor(tokens, device=device))
            state = keep_where(torch.tensor(going, device=device), moved, state)
        return state


def keep_where(rows: torch.Tensor, chosen: DeviceState, other: DeviceState) -> DeviceState:
    """`chosen`'s state for the rows marked in `rows` [B], `other`'s for the rest."""
    return DeviceState(
        literal=torch.where(rows, chosen.literal, other.literal),
        answered=torch.where(rows, chosen.answered, other.answered),
        label=torch.where(rows, chosen.label, other.label),
        length=torch.where(rows, chosen.length, other.length),
        ended=torch.where(rows, chosen.ended, other.ended),
        ends=torch.where(rows[:, None], chosen.ends, other.ends),
    )
