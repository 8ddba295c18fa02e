"""The grammar's two pure step functions on the device: which tokens each row may take next, and the
rows' state after a token each. Gathers, scatters and bit operations over fixed shapes: nothing is
brought to the host and no index array is built there, so CUDA runs a step without waiting.

A row may take: a literal step from its own literal state or, where its open value may end, from
the way out of that value (tab, newline); end-of-sequence where its state admits it and every label
is answered; a value's first token after a glue head (a dense row per document, head and type);
and, inside a value, a token whose bytes occur in the source at one of the value's end positions
(Shift-And over tokens: the positions move by the token's length where it matches). A row left with
nothing (a dead end the grammar cannot reach, kept for safety) may end; rows without a grammar
(padding) are free.
"""

from __future__ import annotations

import torch

from model.grammar.state import DeviceState
from model.grammar.tables import DeviceTables
from model.signals import static_path

# Literal-state slots per row: its own state, and the way out of its open value.
OWN, EXIT = 0, 1


def legal(tables: DeviceTables, state: DeviceState, *, static: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, width] bool: the tokens each row may take, [B] bool: exactly one was legal). `static`:
    shapes that never depend on the data (the default off a CPU; see `_open_ends`)."""
    rows, trash = tables.rows, tables.trash
    mask = torch.zeros(rows, trash + 1, dtype=torch.bool, device=state.ended.device)
    live = ~state.ended & ~tables.free
    sources = _sources(tables, state, live)
    answered = state.answered
    # Literal steps.
    tok = tables.lit_tok[sources]
    ok = (tok != trash) & _conditions(answered, tables.lit_done[sources], tables.lit_need[sources])
    mask.scatter_(1, torch.where(ok, tok, trash).flatten(1), True)
    has = ok.flatten(1).any(1)
    # End-of-sequence once every label is answered, where a state admits it.
    complete = answered == tables.complete
    eos = complete & (tables.eos_kind[sources] != 0).any(1)
    # A value's first token after a glue head: the dense row of the row's document, head and type.
    entry = _glue_entries(tables, state, sources)
    bytes_ = _bytes(mask)
    for slot in range(entry.shape[1]):
        bytes_ |= _bytes(tables.entry_rows[entry[:, slot]])
    has |= (entry != len(tables.entry_rows) - 1).any(1)
    # Inside a value: the tokens occurring at its end positions, less those a checked type refuses.
    row, pos, valid = _open_ends(state.ends, static)
    at = (tables.row_offset[row] + pos).clamp(max=len(tables.pos_tok) - 1)  # slots past a row's bits: not valid
    following = tables.pos_tok[at]
    kind = _value_type(tables, state, row)
    start = at - state.length[row]
    ends_at = (at[:, None] + tables.tok_len[following]).clamp(max=tables.alive.shape[1] - 1)
    fits = (ends_at <= tables.reach[kind, start][:, None]) & tables.alive[kind[:, None], ends_at]
    keep = (valid & live[row])[:, None] & fits & (following != trash)
    mask.index_put_((row[:, None].expand_as(following), torch.where(keep, following, trash)), _true(mask))
    has |= torch.zeros(rows, dtype=torch.long, device=mask.device).index_add_(0, row, keep.any(1).long()) > 0
    mask[:, tables.eos_id] |= eos | (~has & ~tables.free)
    bytes_ |= _bytes(tables.free)[:, None]
    forced = (bytes_[:, :trash].sum(1, dtype=torch.int32) == 1) & ~tables.free
    return mask[:, :trash], forced


def advance(
    tables: DeviceTables, state: DeviceState, tokens: torch.Tensor, *, static: bool | None = None
) -> DeviceState:
    """The rows' state after each took its token (a legal one: the caller masked)."""
    rows, width = tables.rows, tables.value_width
    tokens = tokens.long()
    live = ~state.ended & ~tables.free & (tokens != tables.eos_id)
    sources = _sources(tables, state, ~state.ended & ~tables.free)
    answered = state.answered
    # Literal walks: the row's own state wins over the way out of its value (they agree where both hold).
    hit = (tables.lit_tok[sources] == tokens[:, None, None]) & _conditions(
        answered, tables.lit_done[sources], tables.lit_need[sources]
    )
    # A state lists a token at most once (its literal bytes lead one way).
    found = hit.any(2)
    following = torch.where(hit, tables.lit_next[sources], -1).amax(2)
    done_by = torch.where(hit, tables.lit_done[sources], 0).amax(2)
    own, other = found[:, OWN], found[:, EXIT]
    literal = torch.where(own, following[:, OWN], torch.where(other, following[:, EXIT], -1))
    done = torch.where(own, done_by[:, OWN], torch.where(other, done_by[:, EXIT], 0))
    # A value opened after a glue head: every start where the token spells the head and the value's
    # first bytes.
    ends = torch.zeros(rows, tables.ends_width, dtype=torch.bool, device=tokens.device)
    head = tables.glue_head[sources]
    good = (head >= 0) & ((answered[:, None, None] & tables.glue_done[sources]) == 0) & live[:, None, None]
    key = (tables.entry_base[:, None, None] + head) * tables.vocab_stride + tokens[:, None, None]
    lo = torch.searchsorted(tables.entry_key, key)
    hi = torch.searchsorted(tables.entry_key, key, right=True)
    index = lo[..., None] + torch.arange(tables.entry_most, device=tokens.device)
    inside = index < hi[..., None]
    index = index.clamp(max=len(tables.entry_key) - 1)
    start, taken = tables.entry_pos[index], tables.entry_taken[index]
    label = tables.glue_label[sources]
    kind = tables.row_type.gather(1, label.flatten(1)).view_as(label)
    opens = good[..., None] & inside & (start + taken <= tables.reach[kind[..., None], start])
    local = start + taken - tables.row_offset[:, None, None, None]
    ends.scatter_(1, torch.where(opens, local, width).flatten(1), True)
    opened_by = opens.any(3)
    opened = opened_by.flatten(1).any(1)
    opened_label = torch.where(opened_by, label, -1).flatten(1).amax(1)
    opened_length = torch.where(opens, taken, 0).flatten(1).amax(1)
    glue_done = torch.where(opened_by, tables.glue_done[sources], 0).flatten(1)
    for slot in range(glue_done.shape[1]):
        done = done | glue_done[:, slot]
    # An open value continued: the token occurs at one of its end positions.
    row, pos, valid = _open_ends(state.ends, static)
    at = (tables.row_offset[row] + pos).clamp(max=len(tables.pos_tok) - 1)  # slots past a row's bits: not valid
    token = tokens[row]
    step = tables.tok_len[token]
    occurs = (tables.pos_tok[at] == token[:, None]).any(1)
    fits = at + step <= tables.reach[_value_type(tables, state, row), at - state.length[row]]
    keep = valid & live[row] & ~opened[row] & occurs & fits
    ends.index_put_((row, torch.where(keep, pos + step, width)), _true(ends))
    continued = torch.zeros(rows, dtype=torch.long, device=tokens.device).index_add_(0, row, keep.long()) > 0
    ends[:, width:] = False
    value_label = torch.where(opened, opened_label, torch.where(continued, state.label, -1))
    length = torch.where(
        opened, opened_length, torch.where(continued, state.length + tables.tok_len[tokens.clamp(max=tables.trash)], 0)
    )
    return DeviceState(
        literal=torch.where(live, literal, state.literal),
        answered=torch.where(live, answered | done, answered),
        label=torch.where(live, value_label, state.label),
        length=torch.where(live, length, state.length),
        ended=state.ended | (tokens == tables.eos_id),
        ends=ends,
    )


def _bytes(flags: torch.Tensor) -> torch.Tensor:
    """A bool tensor as bytes, sharing its memory: bool reductions and ORs run several times faster
    as bytes in eager CPU code. Compiled, as is: inductor's CPU code generator fails on the view (a
    bool pointer into a byte buffer), and fuses the operations anyway."""
    return flags if torch.compiler.is_compiling() else flags.view(torch.uint8)


def _true(like: torch.Tensor) -> torch.Tensor:
    return torch.ones((), dtype=torch.bool, device=like.device)


def _sources(tables: DeviceTables, state: DeviceState, live: torch.Tensor) -> torch.Tensor:
    """[B, 2] literal states to step from (own, and the way out of the open value where it may end);
    the empty state where there is none."""
    rows = torch.arange(tables.rows, device=state.ends.device)
    boundary = tables.row_boundary[rows, _value_type(tables, state, rows)]
    can_end = (_bytes(state.ends) & _bytes(boundary)).amax(1) > 0
    exits = tables.exit_state.gather(1, state.label.clamp(min=0)[:, None])[:, 0]
    own = torch.where(live & (state.literal >= 0), state.literal, tables.no_state)
    out = torch.where(live & can_end & (state.label >= 0) & (exits >= 0), exits, tables.no_state)
    return torch.stack([own, out], 1)


def _conditions(answered: torch.Tensor, done: torch.Tensor, need: torch.Tensor) -> torch.Tensor:
    answered = answered[:, None, None]
    return ((answered & done) == 0) & ((need < 0) | ((need & ~answered) != 0))


def _glue_entries(tables: DeviceTables, state: DeviceState, sources: torch.Tensor) -> torch.Tensor:
    """[B, slots] dense entry rows of the value starts after the sources' glue heads (the empty row
    where there is none)."""
    head = tables.glue_head[sources]
    good = (head >= 0) & ((state.answered[:, None, None] & tables.glue_done[sources]) == 0)
    label = tables.glue_label[sources]
    kind = tables.row_type.gather(1, label.flatten(1)).view_as(label)
    sets = tables.entry_base[:, None, None] + head
    entry = tables.entry_row[(sets * tables.n_types + kind).clamp(min=0)]
    empty = len(tables.entry_rows) - 1
    return torch.where(good & (entry >= 0), entry, empty).flatten(1)


def _value_type(tables: DeviceTables, state: DeviceState, row: torch.Tensor) -> torch.Tensor:
    label = state.label[row]
    return torch.where(label >= 0, tables.row_type[row, label.clamp(min=0)], 0)


def _open_ends(ends: torch.Tensor, static: bool | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row, local position, valid) of open values' end positions. Static (the default off a CPU): a
    fixed number of slots, one per bit, so that the shape never depends on the data and the host
    never waits. Otherwise (a CPU, eager: no device to wait for) the 8-byte words holding a set bit,
    each as 8 slots: far fewer slots to gather over."""
    rows = ends.shape[0]
    if not static_path(static, ends):
        words = ends.view(rows, -1, 8)
        at = (words.view(rows, -1, 8).view(torch.int64)[..., 0] != 0).nonzero()
        eight = torch.arange(8)
        row = at[:, :1].expand(-1, 8).flatten()
        pos = (at[:, 1:] * 8 + eight).flatten()
        return row, pos, words[at[:, 0], at[:, 1]].flatten()
    at = torch.nonzero_static(ends, size=ends.numel(), fill_value=-1)
    valid = at[:, 0] >= 0
    at = at.clamp(min=0)
    return at[:, 0], at[:, 1], valid
