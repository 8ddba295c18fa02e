"""A batch's grammar tables on the host: every row's document, chunk and checked types laid out in
flat numpy arrays (built once per batch, then only read), from which both the host grammar
(model/grammar/host.py) and the device grammar (model/grammar/tables.py) step.

The documents of a batch share one position space (each document's bytes, then one slot for its
end), so that every per-position table is one array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from model.grammar.literal import ChunkTable, pad_steps
from model.grammar.source import UNLIMITED, SourceTables, entries, may_end, reach
from model.grammar.vocab import VocabIndex


@dataclass(frozen=True)
class RowGrammar:
    """One prompt's constraint: its document's tables, its chunk's, and its labels' kinds: a checked
    type, a word-edge class (model/grammar/source.py:WordEdges) or None."""

    source: SourceTables
    chunk: ChunkTable
    types: tuple[str | None, ...]


@dataclass
class Layout:
    """Arrays over literal states (lit_*, eos_kind, glue_*), rows (row_*, state_offset, complete,
    exit_state), positions (boundary, first, match_*, reach) and value entries (entry_*)."""

    rows: list[RowGrammar | None]
    free: np.ndarray  # rows without a grammar (padding): left free
    source_offset: np.ndarray = field(init=False)
    boundary: np.ndarray = field(init=False)
    match_tok: np.ndarray = field(init=False)
    first: np.ndarray = field(init=False)
    match_key: np.ndarray = field(init=False)
    lit_tok: np.ndarray = field(init=False)
    lit_next: np.ndarray = field(init=False)
    lit_done: np.ndarray = field(init=False)
    lit_need: np.ndarray = field(init=False)
    eos_kind: np.ndarray = field(init=False)
    glue_head: np.ndarray = field(init=False)
    glue_label: np.ndarray = field(init=False)
    glue_done: np.ndarray = field(init=False)
    row_source: np.ndarray = field(init=False)
    state_offset: np.ndarray = field(init=False)
    complete: np.ndarray = field(init=False)
    exit_state: np.ndarray = field(init=False)
    type_names: list[str | None] = field(init=False)
    row_type: np.ndarray = field(init=False)
    reach: list[np.ndarray] = field(init=False)
    end_ok: np.ndarray = field(init=False)  # [kinds, positions] bool: a value of the kind may end here
    alive: np.ndarray = field(init=False)  # [kinds, positions + 1] bool: ... may be here (and reach an end)
    n_heads: int = field(init=False)
    entry_key: np.ndarray = field(init=False)
    entry_pos: np.ndarray = field(init=False)
    entry_taken: np.ndarray = field(init=False)
    entry_row: np.ndarray = field(init=False)
    entry_rows: torch.Tensor = field(init=False)
    entry_ids: list[np.ndarray] = field(init=False)

    @property
    def positions(self) -> int:
        return int(self.source_offset[-1])


def build_layout(rows: Sequence[RowGrammar | None], vocab: VocabIndex, device: torch.device) -> Layout:
    rows = list(rows)
    out = Layout(rows, np.array([r is None for r in rows], dtype=bool))
    size = vocab.size
    sources: dict[int, int] = {}
    chunks: dict[int, int] = {}
    source_list: list[SourceTables] = []
    chunk_list: list[ChunkTable] = []
    for r in rows:
        if r is None:
            continue
        if id(r.source) not in sources:
            sources[id(r.source)] = len(source_list)
            source_list.append(r.source)
        if id(r.chunk) not in chunks:
            chunks[id(r.chunk)] = len(chunk_list)
            chunk_list.append(r.chunk)
    # One position space: each document's bytes and its end slot.
    sizes = np.array([s.size + 1 for s in source_list], dtype=np.int64)
    out.source_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    total = int(out.source_offset[-1])
    out.boundary = np.concatenate([s.boundary for s in source_list]) if source_list else np.zeros(0, bool)
    match_pos = np.concatenate(
        [s.match_pos + o for s, o in zip(source_list, out.source_offset, strict=False)] or [np.zeros(0, np.int64)]
    )
    out.match_tok = np.concatenate([s.match_tok for s in source_list] or [np.zeros(0, np.int64)])
    out.first = np.searchsorted(match_pos, np.arange(total + 1))
    out.match_key = match_pos * (size + 1) + out.match_tok
    # Literal tables, states concatenated.
    state_offsets = np.concatenate([[0], np.cumsum([len(c.eos) for c in chunk_list])]).astype(np.int64)
    out.lit_tok, out.lit_next, out.lit_done, out.lit_need = pad_steps(chunk_list, size)
    out.eos_kind = np.array([e for c in chunk_list for e in c.eos], dtype=np.int64)
    heads: dict[bytes, int] = {}
    glue_rows = [g for c in chunk_list for g in c.glues]
    for glues in glue_rows:
        for g in glues:
            heads.setdefault(g.head, len(heads))
    width = max([1] + [len(g) for g in glue_rows])
    out.glue_head = np.full((len(glue_rows), width), -1, dtype=np.int64)
    out.glue_label = np.zeros((len(glue_rows), width), dtype=np.int64)
    out.glue_done = np.zeros((len(glue_rows), width), dtype=np.int64)
    for s, glues in enumerate(glue_rows):
        for k, g in enumerate(glues):
            out.glue_head[s, k], out.glue_label[s, k], out.glue_done[s, k] = heads[g.head], g.label, g.done
    # Per row: its document, its chunk's first state, all labels, exits per label, checked types.
    n = len(rows)
    most = max([1] + [len(r.chunk.labels) for r in rows if r is not None])
    out.row_source = np.zeros(n, dtype=np.int64)
    out.state_offset = np.zeros(n, dtype=np.int64)
    out.complete = np.zeros(n, dtype=np.int64)
    out.exit_state = np.full((n, most), -1, dtype=np.int64)
    types = sorted({t for r in rows if r is not None for t in r.types if t is not None})
    out.type_names = [None, *types]
    out.row_type = np.zeros((n, most), dtype=np.int64)
    for i, r in enumerate(rows):
        if r is None:
            continue
        offset = state_offsets[chunks[id(r.chunk)]]
        out.row_source[i] = sources[id(r.source)]
        out.state_offset[i] = offset
        out.complete[i] = r.chunk.complete
        out.exit_state[i, : len(r.chunk.labels)] = offset + np.array(r.chunk.exit_state)
        out.row_type[i, : len(r.types)] = [out.type_names.index(t) for t in r.types]
    # How far a checked type's value may run from each start, in the shared position space.
    out.reach = [np.full(total + 1, UNLIMITED, dtype=np.int64)]
    users = {kind: {sources[id(r.source)] for r in rows if r is not None and kind in r.types} for kind in types}
    for kind in types:
        spans = [
            reach(s, kind) + o if d in users[kind] else np.full(s.size + 1, UNLIMITED, dtype=np.int64)
            for d, (s, o) in enumerate(zip(source_list, out.source_offset, strict=False))
        ]
        out.reach.append(np.concatenate([*spans, np.array([UNLIMITED])]))
    # Where each kind's values may end (a character boundary, and a word edge for a word-edge class or
    # a whole value's end for a checked type), and where they may be, in the documents that ask for the
    # kind; one more position than the documents', always allowed, for padding.
    ends = [
        [may_end(s, kind if d in users[kind] else None, vocab.lengths) for d, s in enumerate(source_list)]
        for kind in types
    ]
    out.end_ok = np.stack([out.boundary, *(np.concatenate([e for e, _ in k] or [out.boundary]) for k in ends)])
    out.alive = np.stack(
        [np.ones(total + 1, dtype=bool), *(np.concatenate([*(a for _, a in k), [True]]) for k in ends)]
    )
    # Glue entries per (document, head): sorted by (set, token); set = document * heads + head.
    out.n_heads = max(1, len(heads))
    keys, pos, taken = [], [], []
    for d, s in enumerate(source_list):
        for head, h in heads.items():
            e = entries(s, vocab, head)
            keys.append((d * out.n_heads + h) * (size + 1) + e.tok)
            pos.append(e.pos + out.source_offset[d])
            taken.append(e.taken)
    key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")
    out.entry_key = key[order]
    out.entry_pos = np.concatenate(pos)[order] if pos else np.zeros(0, np.int64)
    out.entry_taken = np.concatenate(taken)[order] if taken else np.zeros(0, np.int64)
    # Dense token rows per (set, type) for the mask, built on the logits' device.
    n_types = len(out.type_names)
    out.entry_row = np.full(len(source_list) * out.n_heads * n_types, -1, dtype=np.int64)
    dense = []
    sets = len(source_list) * out.n_heads
    for set_id in range(sets):
        lo, hi = np.searchsorted(out.entry_key, [set_id * (size + 1), (set_id + 1) * (size + 1)])
        for t in range(n_types):
            tok = out.entry_key[lo:hi] - set_id * (size + 1)
            if t:
                p, ends_at = out.entry_pos[lo:hi], out.entry_pos[lo:hi] + out.entry_taken[lo:hi]
                tok = tok[(ends_at <= out.reach[t][p]) & out.alive[t][ends_at]]
            if not len(tok):
                continue
            out.entry_row[set_id * n_types + t] = len(dense)
            # A set's keys are sorted, so its tokens are: repeats (a token at several starts) are neighbours.
            dense.append(tok[np.concatenate([[True], tok[1:] != tok[:-1]])])
    dense_rows = np.zeros((max(1, len(dense)), size), dtype=bool)
    which = np.repeat(np.arange(len(dense)), [len(tok) for tok in dense])
    dense_rows[which, np.concatenate(dense or [[]]).astype(np.int64)] = True
    out.entry_rows = torch.from_numpy(dense_rows).to(device)
    out.entry_ids = dense
    return out
