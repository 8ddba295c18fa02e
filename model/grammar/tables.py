"""A batch's grammar tables as tensors on the engine's device: the host layout (model/grammar/layout.py)
padded into fixed shapes, so that a step (model/grammar/step.py) is gathers, scatters and bit
operations with no index array built on the host.

Conventions that keep every gather in bounds without a branch:
- token tables use `trash` (= the mask's width) as padding: it indexes the mask's one extra column,
  which is dropped at the end;
- literal-state tables have one extra, empty state (`no_state`) that -1 (no state) is mapped to;
- the dense value-entry rows have one extra, empty row that -1 (no entry) is mapped to;
- a row's open value is a bitset over its own document's positions [B, ends_width]: local position
  p is global position `row_offset + p`; column `value_width` is where discarded ends are written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.grammar.layout import Layout
from model.grammar.vocab import VocabIndex


@dataclass(frozen=True)
class DeviceTables:
    eos_id: int
    trash: int  # the mask's width: the padding token, and the index of the mask's dropped column
    no_state: int  # the empty literal state
    # Literal states [S + 1, K]: token, next state, labels done, labels one of which must be free.
    lit_tok: torch.Tensor
    lit_next: torch.Tensor
    lit_done: torch.Tensor
    lit_need: torch.Tensor
    eos_kind: torch.Tensor  # [S + 1]
    # Glue heads per state [S + 1, G]: head id (-1 none), label, labels done.
    glue_head: torch.Tensor
    glue_label: torch.Tensor
    glue_done: torch.Tensor
    # Per row [B] / [B, L].
    free: torch.Tensor
    start_state: torch.Tensor
    complete: torch.Tensor
    exit_state: torch.Tensor
    row_type: torch.Tensor
    entry_base: torch.Tensor  # [B]: the row's document * heads, the first of its entry sets
    row_offset: torch.Tensor  # [B]: where the row's document starts in the batch's positions
    # [B, kinds, ends_width] bool: a value of the kind may end at the local position (a character
    # starts there, and for a word-edge class a word does).
    row_boundary: torch.Tensor
    # Per global position: the tokens whose bytes occur there [P, M], padded with `trash`.
    pos_tok: torch.Tensor
    tok_len: torch.Tensor  # [trash + 1]: each token's bytes, 0 for special tokens and padding
    reach: torch.Tensor  # [types, P + 1]: where a checked type's value may run to from each start
    alive: torch.Tensor  # [types, P + 1] bool: where a value of the kind may be (and still reach an end)
    n_heads: int
    n_types: int
    vocab_stride: int  # entry keys are set * vocab_stride + token
    # Value entries after glue heads, sorted by key; at most `entry_most` share a key.
    entry_key: torch.Tensor
    entry_pos: torch.Tensor
    entry_taken: torch.Tensor
    entry_most: int
    entry_row: torch.Tensor  # [sets * types]: the dense row of (set, type), -1 none
    entry_rows: torch.Tensor  # [rows + 1, trash + 1] bool, the last row empty
    value_width: int  # local positions per row's bitset (the longest document's, with its end slot)
    ends_width: int  # the bitset's columns: value_width is where discarded ends go, then padding to 8

    @property
    def rows(self) -> int:
        return int(self.free.shape[0])


def device_tables(layout: Layout, vocab: VocabIndex, eos_id: int, width: int, device: torch.device) -> DeviceTables:
    """The layout's tables on `device`, for a mask `width` tokens wide (the model's vocabulary, at
    least the tokenizer's)."""
    size = vocab.size
    trash = width
    n = len(layout.rows)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device)

    def tokens(a: np.ndarray) -> np.ndarray:
        return np.where(a == size, trash, a)

    def with_empty_state(a: np.ndarray, fill: int) -> np.ndarray:
        return np.concatenate([a, np.full((1, *a.shape[1:]), fill, dtype=a.dtype)])

    states = len(layout.lit_tok)
    # Per row, its document's bounds in the shared position space (padding rows: an empty one).
    offsets = layout.source_offset
    starts = np.where(layout.free, 0, offsets[layout.row_source] if len(offsets) > 1 else 0)
    sizes = np.diff(offsets)
    row_size = np.where(layout.free, 0, sizes[layout.row_source] if len(sizes) else 0)
    value_width = int(max(1, row_size.max(initial=0)))
    # Whole 8-byte words, so that a CPU can find the set bits a word at a time.
    ends_width = -(-(value_width + 1) // 8) * 8
    local = np.arange(ends_width)
    inside = local[None, :] < row_size[:, None]
    kinds = len(layout.type_names)
    boundary = np.zeros((n, kinds, ends_width), dtype=bool)
    if len(layout.boundary):
        at = np.minimum(starts[:, None] + local[None, :], len(layout.boundary) - 1)
        boundary = inside[:, None, :] & layout.end_ok[:, at].transpose(1, 0, 2)
    # Tokens at each global position, padded to the most at any one.
    total = layout.positions
    counts = np.diff(layout.first) if total else np.zeros(0, dtype=np.int64)
    most = int(max(1, counts.max(initial=0)))
    pos_tok = np.full((total + 1, most), trash, dtype=np.int64)
    if len(layout.match_tok):
        position = np.repeat(np.arange(total), counts)
        column = np.arange(len(layout.match_tok)) - np.repeat(layout.first[:-1], counts)
        pos_tok[position, column] = tokens(layout.match_tok)
    tok_len = np.zeros(trash + 1, dtype=np.int64)
    tok_len[:size] = vocab.lengths[:size]
    _, key_counts = np.unique(layout.entry_key, return_counts=True)
    entry_rows = torch.zeros(len(layout.entry_rows) + 1, trash + 1, dtype=torch.bool, device=device)
    entry_rows[:-1, : layout.entry_rows.shape[1]] = layout.entry_rows.to(device)
    return DeviceTables(
        eos_id=eos_id,
        trash=trash,
        no_state=states,
        lit_tok=tensor(with_empty_state(tokens(layout.lit_tok), trash)),
        lit_next=tensor(with_empty_state(layout.lit_next, -1)),
        lit_done=tensor(with_empty_state(layout.lit_done, 0)),
        lit_need=tensor(with_empty_state(layout.lit_need, -1)),
        eos_kind=tensor(np.concatenate([layout.eos_kind, [0]]).astype(np.int64)),
        glue_head=tensor(with_empty_state(layout.glue_head, -1)),
        glue_label=tensor(with_empty_state(layout.glue_label, 0)),
        glue_done=tensor(with_empty_state(layout.glue_done, 0)),
        free=tensor(layout.free),
        start_state=tensor(np.where(layout.free, -1, layout.state_offset)),
        complete=tensor(layout.complete),
        exit_state=tensor(layout.exit_state),
        row_type=tensor(layout.row_type),
        entry_base=tensor(layout.row_source * layout.n_heads),
        row_offset=tensor(starts.astype(np.int64)),
        row_boundary=tensor(boundary),
        pos_tok=tensor(pos_tok),
        tok_len=tensor(tok_len),
        reach=tensor(np.stack(layout.reach)),
        alive=tensor(layout.alive),
        n_heads=layout.n_heads,
        n_types=len(layout.type_names),
        vocab_stride=size + 1,
        entry_key=tensor(np.concatenate([layout.entry_key, [np.iinfo(np.int64).max]])),
        entry_pos=tensor(np.concatenate([layout.entry_pos, [0]])),
        entry_taken=tensor(np.concatenate([layout.entry_taken, [0]])),
        entry_most=int(max(1, key_counts.max(initial=0))),
        entry_row=tensor(layout.entry_row),
        entry_rows=entry_rows,
        value_width=value_width,
        ends_width=ends_width,
    )
