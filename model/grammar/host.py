"""The answer grammar on the host, behind the Grammar protocol (model/grammar/protocol.py): every row's
state in numpy arrays, and two pure functions over a batch's layout (model/grammar/layout.py),
`legal_pairs` and `advance`, as model/grammar/step.py has them on the device. On a CPU it is the decode
loop's grammar where it is the faster of the two, and the reference runner's; tests hold the device
grammar to it token set by token set (tests/test_device_grammar.py).

A row's state is small: a literal state of its chunk's tables (model/grammar/literal.py), a bit mask
of the labels answered, and, inside a value, the value's label, its length in bytes and the source
positions where it may end (one flat list for the batch, sorted by row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.grammar.layout import Layout
from model.grammar.source import UNLIMITED
from model.grammar.vocab import VocabIndex, member


@dataclass(frozen=True)
class HostState:
    literal: np.ndarray  # [B] global literal state, -1 where none is possible
    answered: np.ndarray  # [B]
    label: np.ndarray  # [B] the open value's label (chunk index), -1 where no value is open
    length: np.ndarray  # [B] the open value's bytes so far
    ended: np.ndarray  # [B] bool
    end_row: np.ndarray  # the open values' end positions: (row, global position), sorted by row
    end_pos: np.ndarray


@dataclass(frozen=True)
class HostTables:
    """A batch's layout with what stepping it needs besides: the vocabulary and end-of-sequence."""

    layout: Layout
    vocab: VocabIndex
    eos_id: int


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
            state = keep_where(going, advance(tables, state, tokens), state)
        self._start = state

    def start(self) -> HostState:
        return self._start

    def legal(self, state: HostState) -> tuple[torch.Tensor, torch.Tensor]:
        mask, forced = legal_mask(self.tables, state, self.width)
        return mask.to(self.device), torch.from_numpy(forced).to(self.device)

    def advance(self, state: HostState, tokens: torch.Tensor) -> HostState:
        return advance(self.tables, state, tokens.cpu().numpy().astype(np.int64))


def keep_where(rows: np.ndarray, chosen: HostState, other: HostState) -> HostState:
    """`chosen`'s state for the rows marked in `rows` [B], `other`'s for the rest."""
    take_chosen, take_other = rows[chosen.end_row], ~rows[other.end_row]
    end_row = np.concatenate([chosen.end_row[take_chosen], other.end_row[take_other]])
    order = np.argsort(end_row, kind="stable")
    end_pos = np.concatenate([chosen.end_pos[take_chosen], other.end_pos[take_other]])
    return HostState(
        *(np.where(rows, getattr(chosen, f), getattr(other, f)) for f in ("literal", "answered", "label", "length")),
        ended=np.where(rows, chosen.ended, other.ended),
        end_row=end_row[order],
        end_pos=end_pos[order],
    )


def legal_mask(tables: HostTables, state: HostState, width: int) -> tuple[torch.Tensor, np.ndarray]:
    """([B, width] bool: the tokens each row may take; [B] bool: exactly one was legal). Rows left
    with nothing legal (a dead end the grammar cannot reach, kept for safety) may end; rows without a
    grammar (padding) are free. Built in numpy and handed over without a copy: a torch scatter into a
    fresh mask costs more than the rest of the step's grammar."""
    t = tables.layout
    n = len(t.rows)
    (rows, toks), glue_rows, glue_ids = legal_pairs(tables, state)
    has = np.zeros(n, dtype=bool)
    has[rows] = True
    has[glue_rows] = True
    empty = np.flatnonzero(~has & ~t.free)
    rows, toks = np.concatenate([rows, empty]), np.concatenate([toks, np.full(len(empty), tables.eos_id)])
    forced = _forced(tables, n, rows, toks, glue_rows, glue_ids) & ~t.free
    legal = np.zeros((n, width), dtype=bool)
    legal[rows, toks] = True
    if len(glue_rows):
        # A row may open values after several heads: OR their dense rows, one reduction per row.
        order = np.argsort(glue_rows, kind="stable")
        glue_rows, glue_ids = glue_rows[order], glue_ids[order]
        first = np.flatnonzero(np.concatenate([[True], glue_rows[1:] != glue_rows[:-1]]))
        dense = np.logical_or.reduceat(t.entry_rows.cpu().numpy()[glue_ids], first, axis=0)
        legal[glue_rows[first], : dense.shape[1]] |= dense
    legal[t.free] = True
    return torch.from_numpy(legal), forced


def _forced(tables: HostTables, n: int, rows, toks, glue_rows, glue_ids) -> np.ndarray:
    """Per row, whether exactly one token id is legal (from the host's lists: no pass over the mask)."""
    ids = tables.layout.entry_ids
    sizes = np.array([len(ids[i]) for i in glue_ids], dtype=np.int64)
    single = sizes == 1
    one = np.array([ids[i][0] for i in glue_ids[single]], dtype=np.int64)
    rows = np.concatenate([rows, glue_rows[single]])
    toks = np.concatenate([toks, one])
    stride = tables.vocab.size + 1
    distinct = np.unique(rows * stride + toks) // stride
    count = np.bincount(distinct, minlength=n)
    many = np.zeros(n, dtype=bool)
    many[glue_rows[~single]] = True
    return (count == 1) & ~many


def legal_pairs(tables: HostTables, state: HostState) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """(row, token) pairs of literal steps, end-of-sequence and value continuations; and the rows and
    dense entry-row ids of value starts after glue heads."""
    t, vocab = tables.layout, tables.vocab
    live = ~state.ended & ~t.free
    sources_row, sources_state = _literal_sources(t, state, live, _can_end(t, state))
    answered = state.answered[sources_row]
    tok = t.lit_tok[sources_state]
    ok = (tok != vocab.size) & _conditions(answered, t.lit_done[sources_state], t.lit_need[sources_state])
    i, k = np.nonzero(ok)
    rows = [sources_row[i]]
    toks = [tok[i, k]]
    # End-of-sequence: a line end or a value that may end, once every label is answered.
    complete = answered == t.complete[sources_row]
    eos = complete & (t.eos_kind[sources_state] != 0)
    rows.append(sources_row[eos])
    toks.append(np.full(int(eos.sum()), tables.eos_id))
    # Value starts after glue heads.
    head = t.glue_head[sources_state]
    good = (head >= 0) & ((answered[:, None] & t.glue_done[sources_state]) == 0)
    i, k = np.nonzero(good)
    glue_row = sources_row[i]
    label = t.glue_label[sources_state[i], k]
    kind = t.row_type[glue_row, label]
    set_id = t.row_source[glue_row] * t.n_heads + head[i, k]
    entry = t.entry_row[set_id * len(t.type_names) + kind]
    glue_rows, glue_ids = glue_row[entry >= 0], entry[entry >= 0]
    # Value continuations: tokens occurring at an open value's end positions, into places it may be.
    at = live[state.end_row]
    end_row, end_pos = state.end_row[at], state.end_pos[at]
    lo, hi = t.first[end_pos], t.first[end_pos + 1]
    counts = hi - lo
    flat = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    cont_row = np.repeat(end_row, counts)
    cont_tok = t.match_tok[flat]
    kind = t.row_type[cont_row, state.label[cont_row]]
    if kind.any():
        start = np.repeat(end_pos, counts) - state.length[cont_row]
        ends_at = np.repeat(end_pos, counts) + vocab.lengths[cont_tok]
        fits = t.alive[kind, ends_at] & (ends_at <= _reach(t, kind, start))
        cont_row, cont_tok = cont_row[fits], cont_tok[fits]
    rows.append(cont_row)
    toks.append(cont_tok)
    return (np.concatenate(rows), np.concatenate(toks)), glue_rows, glue_ids


def advance(tables: HostTables, state: HostState, tokens: np.ndarray) -> HostState:
    """The rows' state after each took its token [B] (a legal one: the caller masked)."""
    t, vocab = tables.layout, tables.vocab
    size = vocab.size
    n = len(t.rows)
    live = ~state.ended & ~t.free
    ended = state.ended | (tokens == tables.eos_id)
    live &= tokens != tables.eos_id
    # Literal walks: the row's own state wins over the way out of its value (they agree where both hold).
    sources_row, sources_state = _literal_sources(t, state, live, _can_end(t, state))
    tok = t.lit_tok[sources_state]
    answered = state.answered[sources_row]
    hit = (tok == tokens[sources_row][:, None]) & _conditions(
        answered, t.lit_done[sources_state], t.lit_need[sources_state]
    )
    found = hit.any(axis=1)
    k = hit.argmax(axis=1)
    literal = np.full(n, -1, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    order = np.flatnonzero(found)[::-1]  # the row's own state is listed first: write it last
    literal[sources_row[order]] = t.lit_next[sources_state[order], k[order]]
    done[sources_row[order]] = t.lit_done[sources_state[order], k[order]]
    # A value opened after a glue head.
    head = t.glue_head[sources_state]
    good = (head >= 0) & ((answered[:, None] & t.glue_done[sources_state]) == 0)
    i, g = np.nonzero(good)
    glue_row = sources_row[i]
    set_id = t.row_source[glue_row] * t.n_heads + head[i, g]
    key = set_id * (size + 1) + tokens[glue_row]
    lo = np.searchsorted(t.entry_key, key, "left")
    hi = np.searchsorted(t.entry_key, key, "right")
    counts = hi - lo
    flat = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    new_row = np.repeat(glue_row, counts)
    new_label = np.repeat(t.glue_label[sources_state[i], g], counts)
    new_done = np.repeat(t.glue_done[sources_state[i], g], counts)
    start = t.entry_pos[flat]
    new_pos = start + t.entry_taken[flat]
    fits = new_pos <= _reach(t, t.row_type[new_row, new_label], start)
    new_row, new_pos, new_label, new_done = new_row[fits], new_pos[fits], new_label[fits], new_done[fits]
    label = np.full(n, -1, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    label[new_row] = new_label
    length[new_row] = t.entry_taken[flat][fits]
    done[new_row] |= new_done
    opened = np.zeros(n, dtype=bool)
    opened[new_row] = True
    # An open value continued: the token occurs at one of its end positions.
    at = live[state.end_row] & ~opened[state.end_row]
    end_row, end_pos = state.end_row[at], state.end_pos[at]
    token = tokens[end_row]
    occurs = member(t.match_key, end_pos * (size + 1) + token)
    end_row, end_pos, token = end_row[occurs], end_pos[occurs], token[occurs]
    moved = end_pos + vocab.lengths[token]
    kind = t.row_type[end_row, state.label[end_row]]
    fits = moved <= _reach(t, kind, end_pos - state.length[end_row])
    end_row, moved = end_row[fits], moved[fits]
    label[end_row] = state.label[end_row]
    length[end_row] = state.length[end_row] + vocab.lengths[tokens[end_row]]
    rows = np.concatenate([new_row, end_row])
    pos = np.concatenate([new_pos, moved])
    order = np.argsort(rows, kind="stable")
    return HostState(
        literal=np.where(live, literal, state.literal),
        answered=np.where(live, state.answered | done, state.answered),
        label=np.where(live, label, state.label),
        length=np.where(live, length, state.length),
        ended=ended,
        end_row=rows[order],
        end_pos=pos[order],
    )


def _can_end(t: Layout, state: HostState) -> np.ndarray:
    """Per row: a value is open and may end here (some end position is a character boundary, and a
    word edge where its label's values end on words)."""
    out = np.zeros(len(state.label), dtype=bool)
    kind = t.row_type[state.end_row, state.label[state.end_row]]
    out[state.end_row[t.end_ok[kind, state.end_pos]]] = True
    return out


def _literal_sources(t: Layout, state: HostState, live: np.ndarray, can_end: np.ndarray):
    """(row, literal state) pairs: each row's own literal state, and the way out of its open value."""
    own = np.flatnonzero(live & (state.literal >= 0))
    out = np.flatnonzero(live & can_end & (state.label >= 0))
    exits = t.exit_state[out, state.label[out]]
    return np.concatenate([own, out]), np.concatenate([state.literal[own], exits])


def _conditions(answered: np.ndarray, done: np.ndarray, need: np.ndarray) -> np.ndarray:
    answered = answered[:, None]
    return ((answered & done) == 0) & ((need < 0) | ((need & ~answered) != 0))


def _reach(t: Layout, kind: np.ndarray, start: np.ndarray) -> np.ndarray:
    out = np.full(len(kind), UNLIMITED, dtype=np.int64)
    for k in np.unique(kind[kind > 0]):
        sel = kind == k
        out[sel] = t.reach[k][start[sel]]
    return out
