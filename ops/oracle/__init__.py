"""The answer grammar as it was first written: a byte automaton per prompt (automaton.py) walked by
Python per row and step (constraints.py). No longer the product's; kept as the oracle the tests hold
the array grammar (model/grammar/) to, token set by token set, and as the old path the engine
benchmark measures beside the new one."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ops.oracle.constraints import BatchConstraint, Constrainer, RowConstraint


class OracleConstrainer(Constrainer):
    """Stands in for model/grammar/constrainer.py's Constrainer inside an engine (a GrammarBuilder):
    the same rows and batches, answered by the oracle. Its rows hold their state, so a batch starts
    from fresh copies."""

    def grammar(
        self, rows: Sequence[RowConstraint | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> OracleGrammar:
        """As model/grammar/constrainer.py's Constrainer.grammar, answered by the oracle on the host."""
        return OracleGrammar(self.batch(rows, prefixes), batch_rows, width)

    def batch(self, rows: Sequence[RowConstraint | None], prefixes: Sequence[Sequence[int]] = ()) -> OracleBatch:
        fresh = [None if r is None else RowConstraint(r.grammar, r.index, r.eos_id) for r in rows]
        for row, prefix in zip(fresh, prefixes, strict=False):
            for token in prefix if row is not None else ():
                row.advance(token)
        return OracleBatch(fresh, self.eos_id)


class OracleBatch(BatchConstraint):
    """The oracle's batch, knowing when every row has ended."""

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


class OracleGrammar:
    """An oracle batch behind the Grammar protocol (model/grammar/protocol.py), for `rows` batch rows
    masked `width` tokens wide; its state is every row's configurations and whether it ended."""

    def __init__(self, batch: OracleBatch, rows: int, width: int) -> None:
        self.batch = batch
        self.rows = rows
        self.width = width

    def start(self) -> tuple:
        return self._snapshot()

    def legal(self, state: tuple) -> tuple[torch.Tensor, torch.Tensor]:
        self._restore(state)
        return self.batch.legal(torch.empty(1, 1).expand(self.rows, self.width))

    def advance(self, state: tuple, tokens: torch.Tensor) -> tuple:
        self._restore(state)
        self.batch.advance(tokens)
        return self._snapshot()

    def _snapshot(self) -> tuple:
        rows = tuple(None if r is None else (r.configs, r.ended) for r in self.batch.rows)
        return rows, tuple(self.batch.ended)

    def _restore(self, state: tuple) -> None:
        rows, ended = state
        for row, saved in zip(self.batch.rows, rows, strict=True):
            if row is not None:
                row.configs, row.ended = saved
        self.batch.ended = list(ended)
