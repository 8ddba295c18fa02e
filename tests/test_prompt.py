"""SeqGPT's prompt as its reference code builds it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.answers.prompt import chunk_labels


@pytest.mark.parametrize(
    ("count", "sizes"), [(6, [6]), (7, [4, 3]), (8, [4, 4]), (13, [5, 4, 4]), (1, [1]), (12, [6, 6]), (0, [])]
)
def test_labels_are_split_into_near_equal_chunks(count: int, sizes: list[int]) -> None:
    labels = [f"l{i}" for i in range(count)]
    chunks = chunk_labels(labels, 6)
    assert [len(c) for c in chunks] == sizes
    assert [label for chunk in chunks for label in chunk] == labels


def test_chunks_are_those_of_the_reference_array_split() -> None:
    for count in range(1, 65):
        for size in range(1, 9):
            labels = [f"l{i}" for i in range(count)]
            reference = [tuple(str(x) for x in part) for part in np.array_split(labels, math.ceil(count / size))]
            assert chunk_labels(labels, size) == reference
