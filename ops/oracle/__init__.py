"""The answer grammar as it was first written: a byte automaton per prompt (automaton.py) walked by
Python per row and step (constraints.py). No longer the product's; kept as the oracle the tests hold
the array grammar (model/grammar/) to, token set by token set, and as the old path the engine
benchmark measures beside the new one."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ops.oracle.constraints import BatchConstraint, Constrainer, RowConstraint


class OracleConstrainer(Constrainer):
    """Stands in for model/grammar/mask.py's Constrainer inside an engine: the same rows and batches,
    answered by the oracle. Its rows hold their state, so a batch starts from fresh copies."""

    def batch(self, rows: Sequence[RowConstraint | None], prefixes: Sequence[Sequence[int]] = ()) -> OracleBatch:
        fresh = [None if r is None else RowConstraint(r.grammar, r.index, r.eos_id) for r in rows]
        for row, prefix in zip(fresh, prefixes, strict=False):
            for token in prefix if row is not None else ():
                row.advance(token)
        return OracleBatch(fresh, self.eos_id)


class OracleBatch(BatchConstraint):
    """The oracle's batch, knowing (as model/grammar/mask.py's does) when every row has ended."""

    def __init__(self, rows: Sequence[RowConstraint | None], eos_id: int) -> None:
        super().__init__(rows)
        self.eos_id = eos_id
        self.ended = [False] * len(self.rows)

    def advance(self, chosen: torch.Tensor, which: Sequence[int] | None = None) -> None:
        super().advance(chosen, which)
        which = range(chosen.shape[0]) if which is None else which
        for r, token in zip(which, chosen.tolist(), strict=True):
            if r < len(self.ended) and token == self.eos_id:
                self.ended[r] = True

    def all_ended(self) -> bool:
        return all(self.ended)
