"""The host grammar's step as compiled loops (numba): a row's legal tokens, and its state after a token.

The same rules as the device grammar's tensors (model/grammar/step.py), walked row by row. A step of a
batch costs a few thousand scalar operations; as vectorised numpy it cost ~70 array calls, 0.4 ms a
step at 64 rows and more than a third of a small batch's decode on a CPU (ops/BENCHMARKS.md). Compiled
once per machine (`cache=True` keeps the machine code beside this file, or in numba's user cache).

`Kernel` holds a batch layout's arrays in the order the loops unpack them; the state is HostState's
arrays (model/grammar/host.py).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from model.grammar.layout import Layout
from model.grammar.vocab import grown


class Kernel(NamedTuple):
    lit_tok: np.ndarray
    lit_next: np.ndarray
    lit_done: np.ndarray
    lit_need: np.ndarray
    eos_kind: np.ndarray
    glue_head: np.ndarray
    glue_label: np.ndarray
    glue_done: np.ndarray
    row_source: np.ndarray
    complete: np.ndarray
    exit_state: np.ndarray
    row_type: np.ndarray
    free: np.ndarray
    reach: np.ndarray  # [kinds, positions + 1]: the layout's per-kind reach, stacked
    end_ok: np.ndarray
    alive: np.ndarray
    first: np.ndarray
    match_tok: np.ndarray
    entry_key: np.ndarray
    entry_pos: np.ndarray
    entry_taken: np.ndarray
    entry_row: np.ndarray
    ids_first: np.ndarray  # the dense entry rows' token ids, as CSR
    ids_flat: np.ndarray
    lengths: np.ndarray
    scalars: np.ndarray  # n_heads, n_types, vocabulary size, end-of-sequence id


def kernel_of(t: Layout, lengths: np.ndarray, size: int, eos_id: int) -> Kernel:
    i64 = np.int64
    counts = [len(ids) for ids in t.entry_ids]
    return Kernel(
        *(a.astype(i64, copy=False) for a in (t.lit_tok, t.lit_next, t.lit_done, t.lit_need, t.eos_kind)),
        *(a.astype(i64, copy=False) for a in (t.glue_head, t.glue_label, t.glue_done)),
        *(a.astype(i64, copy=False) for a in (t.row_source, t.complete, t.exit_state, t.row_type)),
        t.free.astype(bool, copy=False),
        np.stack(t.reach).astype(i64, copy=False),
        t.end_ok.astype(bool, copy=False),
        t.alive.astype(bool, copy=False),
        t.first.astype(i64, copy=False),
        t.match_tok.astype(i64, copy=False),
        *(a.astype(i64, copy=False) for a in (t.entry_key, t.entry_pos, t.entry_taken, t.entry_row)),
        np.concatenate([[0], np.cumsum(counts)]).astype(i64),
        np.concatenate([*t.entry_ids, np.zeros(0, i64)]).astype(i64),
        lengths.astype(i64, copy=False),
        np.array([t.n_heads, len(t.type_names), size, eos_id], dtype=i64),
    )


@numba.njit(cache=True, inline="always")
def _allowed(answered, done, need):
    return (answered & done) == 0 and (need < 0 or (need & ~answered) != 0)


@numba.njit(cache=True)
def _row_ends(end_row, n):
    """first[r]:first[r + 1] are row r's entries of the (row-sorted) end list."""
    first = np.zeros(n + 1, dtype=np.int64)
    for r in end_row:
        first[r + 1] += 1
    for r in range(n):
        first[r + 1] += first[r]
    return first


@numba.njit(cache=True)
def _sources(k, r, literal, label, can_end, out):
    """Row r's literal states: its own, then the way out of its open value where it may end there."""
    count = 0
    if literal[r] >= 0:
        out[count] = literal[r]
        count += 1
    if can_end and label[r] >= 0:
        out[count] = k.exit_state[r, label[r]]
        count += 1
    return count


@numba.njit(cache=True)
def _can_end(k, r, label, end_pos, lo, hi):
    if label[r] < 0:
        return False
    kind = k.row_type[r, label[r]]
    for j in range(lo, hi):  # noqa: SIM110 - numba compiles no generator expressions
        if k.end_ok[kind, end_pos[j]]:
            return True
    return False


@numba.njit(cache=True)
def legal_mask(k, literal, answered, label, length, ended, end_row, end_pos, legal, forced, yes):
    """Mark each row's legal tokens in `legal` [B, width] with `yes` (every entry something else
    before: a bool mask's True over False, an additive mask's 0.0 over -inf) and fill `forced` [B]
    with whether exactly one is. A row left with nothing legal (an ended row, or a dead end the
    grammar cannot reach) may end; rows without a grammar (padding) are free."""
    n_heads, n_types, size, eos_id = k.scalars[0], k.scalars[1], k.scalars[2], k.scalars[3]
    n = len(literal)
    row_first = _row_ends(end_row, n)
    sources = np.empty(2, dtype=np.int64)
    for r in range(n):
        if k.free[r]:
            legal[r, :] = yes
            forced[r] = False
            continue
        count = 0
        if not ended[r]:
            lo, hi = row_first[r], row_first[r + 1]
            a = answered[r]
            for i in range(_sources(k, r, literal, label, _can_end(k, r, label, end_pos, lo, hi), sources)):
                s = sources[i]
                for j in range(k.lit_tok.shape[1]):
                    tok = k.lit_tok[s, j]
                    if tok != size and _allowed(a, k.lit_done[s, j], k.lit_need[s, j]) and legal[r, tok] != yes:
                        legal[r, tok] = yes
                        count += 1
                if a == k.complete[r] and k.eos_kind[s] != 0 and legal[r, eos_id] != yes:
                    legal[r, eos_id] = yes
                    count += 1
                for j in range(k.glue_head.shape[1]):
                    head = k.glue_head[s, j]
                    if head < 0 or (a & k.glue_done[s, j]) != 0:
                        continue
                    kind = k.row_type[r, k.glue_label[s, j]]
                    entry = k.entry_row[(k.row_source[r] * n_heads + head) * n_types + kind]
                    if entry < 0:
                        continue
                    for m in range(k.ids_first[entry], k.ids_first[entry + 1]):
                        tok = k.ids_flat[m]
                        if legal[r, tok] != yes:
                            legal[r, tok] = yes
                            count += 1
            # An open value continued: tokens occurring at its end positions, into places it may be.
            if label[r] >= 0:
                kind = k.row_type[r, label[r]]
                for j in range(lo, hi):
                    p = end_pos[j]
                    for m in range(k.first[p], k.first[p + 1]):
                        tok = k.match_tok[m]
                        if kind > 0:
                            ends_at = p + k.lengths[tok]
                            if not k.alive[kind, ends_at] or ends_at > k.reach[kind, p - length[r]]:
                                continue
                        if legal[r, tok] != yes:
                            legal[r, tok] = yes
                            count += 1
        if count == 0:
            legal[r, eos_id] = yes
            count = 1
        forced[r] = count == 1


@numba.njit(cache=True)
def _occurs(k, p, tok):
    """Whether token `tok` is spelt by the source at position p (its tokens there are sorted)."""
    lo, hi = k.first[p], k.first[p + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if k.match_tok[mid] < tok:
            lo = mid + 1
        else:
            hi = mid
    return lo < k.first[p + 1] and k.match_tok[lo] == tok


@numba.njit(cache=True)
def advance(k, literal, answered, label, length, ended, end_row, end_pos, tokens, going):
    """The state after each row marked in `going` took its token (a legal one: the caller masked);
    other rows keep theirs. Returns (literal, answered, label, length, ended, end_row, end_pos)."""
    n_heads, size, eos_id = k.scalars[0], k.scalars[2], k.scalars[3]
    n = len(literal)
    row_first = _row_ends(end_row, n)
    literal_out, answered_out = literal.copy(), answered.copy()
    label_out, length_out, ended_out = label.copy(), length.copy(), ended.copy()
    rows_out = np.empty(len(end_row) + 16 * n + 16, dtype=np.int64)
    pos_out = np.empty(len(rows_out), dtype=np.int64)
    count = 0
    sources = np.empty(2, dtype=np.int64)
    for r in range(n):
        lo, hi = row_first[r], row_first[r + 1]
        if not going[r]:
            for j in range(lo, hi):
                rows_out, pos_out, count = _push(rows_out, pos_out, count, r, end_pos[j])
            continue
        tok = tokens[r]
        if tok == eos_id:
            ended_out[r] = True
        if ended[r] or k.free[r] or tok == eos_id:
            continue  # a row no longer live keeps its state, and no value is open in it
        a = answered[r]
        n_sources = _sources(k, r, literal, label, _can_end(k, r, label, end_pos, lo, hi), sources)
        # Literal walks: the row's own state wins over the way out of its value.
        new_literal, done, walked = -1, 0, False
        for i in range(n_sources):
            s = sources[i]
            for j in range(k.lit_tok.shape[1]):
                if k.lit_tok[s, j] == tok and _allowed(a, k.lit_done[s, j], k.lit_need[s, j]):
                    new_literal, done, walked = k.lit_next[s, j], k.lit_done[s, j], True
                    break
            if walked:
                break
        # A value opened after a glue head (the last such opening sets the label, as numpy's writes did).
        new_label, new_length, opened, glue_done = -1, 0, False, 0
        for i in range(n_sources):
            s = sources[i]
            for j in range(k.glue_head.shape[1]):
                head = k.glue_head[s, j]
                if head < 0 or (a & k.glue_done[s, j]) != 0:
                    continue
                key = (k.row_source[r] * n_heads + head) * (size + 1) + tok
                e = np.searchsorted(k.entry_key, key)
                kind = k.row_type[r, k.glue_label[s, j]]
                while e < len(k.entry_key) and k.entry_key[e] == key:
                    start = k.entry_pos[e]
                    moved = start + k.entry_taken[e]
                    if moved <= k.reach[kind, start]:
                        new_label, new_length = k.glue_label[s, j], k.entry_taken[e]
                        glue_done, opened = k.glue_done[s, j], True
                        rows_out, pos_out, count = _push(rows_out, pos_out, count, r, moved)
                    e += 1
        # An open value continued: the token occurs at one of its end positions.
        if not opened and label[r] >= 0:
            kind = k.row_type[r, label[r]]
            for j in range(lo, hi):
                p = end_pos[j]
                if not _occurs(k, p, tok):
                    continue
                moved = p + k.lengths[tok]
                if moved <= k.reach[kind, p - length[r]]:
                    new_label, new_length = label[r], length[r] + k.lengths[tok]
                    rows_out, pos_out, count = _push(rows_out, pos_out, count, r, moved)
        literal_out[r] = new_literal
        answered_out[r] = a | done | glue_done
        label_out[r] = new_label
        length_out[r] = new_length
    return literal_out, answered_out, label_out, length_out, ended_out, rows_out[:count].copy(), pos_out[:count].copy()


@numba.njit(cache=True)
def _push(rows, pos, count, row, at):
    """The end list with (row, at) written at `count`, its buffers grown when full."""
    if count == len(rows):
        rows, pos = grown(rows, 2 * count), grown(pos, 2 * count)
    rows[count], pos[count] = row, at
    return rows, pos, count + 1


def load() -> None:
    """Compile the step now (or load it from numba's cache), as an engine does when it is built, not in
    its first batch: a batch of no rows has the types of every batch."""
    i64 = np.int64
    one, two = np.zeros(1, i64), np.zeros((1, 1), i64)
    no_rows, no_bools = np.zeros(0, i64), np.zeros(0, dtype=bool)
    bools = np.zeros((1, 1), dtype=bool)
    kernel = Kernel(
        two, two, two, two, one, two, two, two, one, one, two, two, no_bools, two, bools, bools, one, one,
        one, one, one, one, one, one, one, np.ones(4, i64),
    )  # fmt: skip
    state = (no_rows, no_rows, no_rows, no_rows, no_bools, no_rows, no_rows)
    legal_mask(kernel, *state, np.zeros((0, 1), dtype=bool), no_bools, True)
    legal_mask(kernel, *state, np.zeros((0, 1), dtype=np.float32), no_bools, np.float32(0.0))
    advance(kernel, *state, no_rows, no_bools)
