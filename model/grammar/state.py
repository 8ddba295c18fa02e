"""Every row's grammar state as tensors on the device: the state model/grammar/step.py steps."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.grammar.tables import DeviceTables


@dataclass(frozen=True)
class DeviceState:
    literal: torch.Tensor  # [B] literal state, -1 where none is possible
    answered: torch.Tensor  # [B] bit mask of the chunk's labels answered
    label: torch.Tensor  # [B] the open value's label, -1 where no value is open
    length: torch.Tensor  # [B] the open value's bytes so far
    ended: torch.Tensor  # [B] bool: end-of-sequence was taken
    # [B, ends_width] bool: the local source positions where the open value may end (Shift-And over
    # tokens advances it); columns from value_width on are never ends.
    ends: torch.Tensor


def start_state(tables: DeviceTables) -> DeviceState:
    rows = tables.rows
    device = tables.free.device
    zeros = torch.zeros(rows, dtype=torch.long, device=device)
    return DeviceState(
        literal=tables.start_state.clone(),
        answered=zeros,
        label=torch.full((rows,), -1, dtype=torch.long, device=device),
        length=zeros.clone(),
        ended=torch.zeros(rows, dtype=torch.bool, device=device),
        ends=torch.zeros(rows, tables.ends_width, dtype=torch.bool, device=device),
    )
