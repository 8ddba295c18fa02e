"""VocabIndex.matches (hashed, model/grammar/vocab.py) finds the (start, token) pairs that a plain walk
over the source finds (TokenBytes.tokens_at), long tokens (checked by their whole run's hash) too."""

from __future__ import annotations

import random

import numpy as np
import pytest

from model.grammar.token_bytes import TokenBytes
from model.grammar.vocab import SHORT, VocabIndex

TEXTS = [
    "甲方：上海浦东新区张江高科技园区，乙方：上海浦东新区张江镇",
    "电话 13800138000\t13800138000 abc\n13800138000",
    "a" * 40,
    "",
]


def vocabulary(texts: list[str], seed: int = 0) -> TokenBytes:
    """Short pieces of the texts, and long ones (past SHORT bytes, some holding a tab or newline)."""
    rng = random.Random(seed)
    pieces: set[bytes] = set()
    for text in texts:
        data = text.encode()
        for i in range(len(data)):
            for n in (1, 2, 3, 4, SHORT + 1, SHORT + 3, SHORT + 8, 3 * SHORT):
                if i + n <= len(data) and rng.random() < 0.7:
                    pieces.add(data[i : i + n])
    by_id = sorted(pieces)
    by_id += [p for p in by_id if len(p) > SHORT][:5]  # twins: two ids spelling the same bytes
    ids: dict[bytes, tuple[int, ...]] = {}
    for i, data in enumerate(by_id):
        ids[data] = (*ids.get(data, ()), i)
    return TokenBytes(by_id=list(by_id), ids=ids, ordered=sorted(ids))


@pytest.mark.parametrize("head", [b"", b" ", b"\t", "区".encode(), b"0" * (SHORT + 2)])
def test_matches_are_the_tokens_a_walk_finds(head: bytes) -> None:
    vocab = vocabulary(TEXTS)
    index = VocabIndex(vocab)
    long = 0
    for text in TEXTS:
        source = text.encode()
        pos, tok, taken = index.matches(np.frombuffer(source, dtype=np.uint8), np.arange(len(source)), head)
        found = set(zip(pos.tolist(), tok.tolist(), taken.tolist(), strict=True))
        expected = {
            (p, t, len(vocab.by_id[t]) - len(head)) for p, t in vocab.tokens_at(source, range(len(source)), head)
        }
        assert found == expected
        assert len(found) == len(pos)
        long += sum(len(vocab.by_id[t]) > SHORT for _, t, _ in found)
    assert long or head  # the long path is taken
