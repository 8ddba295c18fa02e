"""What a decode loop asks of a batch's grammar, whichever implements it: the device grammar
(model/grammar/device.py) or a host one (model/grammar/mask.py's HostGrammar over the array
grammar, ops/oracle over the byte automaton: the oracles the tests hold it to).

The state is the implementation's own and is never changed in place: a loop keeps the one it is
at, and may step ahead from it and drop what it tried.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import torch

State = TypeVar("State")


class Grammar(Protocol[State]):
    def start(self) -> State:
        """Every row's state before its first generated token (after the tokens it was fed)."""
        ...

    def legal(self, state: State) -> tuple[torch.Tensor, torch.Tensor]:
        """([B, width] bool on the device: the tokens each row may take; [B] bool: exactly one)."""
        ...

    def advance(self, state: State, tokens: torch.Tensor) -> State:
        """The rows' state after each took its token [B]."""
        ...
