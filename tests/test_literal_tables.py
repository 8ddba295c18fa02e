"""The literal tables (model/grammar/literal.py) against a byte-at-a-time reference: every token's
bytes stepped through the answer format from every state. And tables built with one TokenRuns shared
across chunks, as the constrainer shares it, are the tables built cold."""

from __future__ import annotations

import random

import numpy as np
import pytest

from model.grammar.literal import LABEL_SEPARATOR, NONE_WORD, ChunkTable, TokenRuns, build_chunk_table
from model.grammar.token_bytes import TokenBytes

# Heads sharing prefixes, a head that is a prefix of another's ("a: " of "a: b: "), a label spelt
# like the literal None.
LABELS = ("甲方", "乙方", "甲方地址", "a", "a: b", "None", "金额")


def vocabulary(labels: tuple[str, ...], longest: int = 9) -> TokenBytes:
    """Every piece of up to `longest` bytes of answers over `labels`: tokens that end inside heads,
    complete them, run on into None, tabs and newlines, and into the next line's head."""
    pieces: set[bytes] = set()
    for a in labels:
        for b in labels:
            text = f"{a}: None\n{b}: v\t{a}: x\n{b}: None\n".encode()
            pieces |= {text[i : i + n] for i in range(len(text)) for n in range(1, longest + 1)}
    by_id: list[bytes | None] = [None, *sorted(pieces)]  # id 0: a special token, no bytes
    ids = {data: (i,) for i, data in enumerate(by_id) if data}
    return TokenBytes(by_id=by_id, ids=ids, ordered=sorted(ids))


def reference_states(labels: tuple[str, ...]) -> list[tuple]:
    heads = [label.encode() + LABEL_SEPARATOR for label in labels]
    prefixes = sorted({h[:n] for h in heads for n in range(len(h))}, key=lambda p: (len(p), p))
    states: list[tuple] = [("line", p) for p in prefixes]
    states += [("start", i, first) for i in range(len(labels)) for first in (True, False)]
    states += [("none", k) for k in range(1, len(NONE_WORD))] + [("line_end",)]
    return states + [("exit", i) for i in range(len(labels))]


def step(heads: list[bytes], state: tuple, done: int, byte: int) -> tuple[tuple, int] | None:
    """One literal byte of the answer format, or None where it may not follow."""
    kind = state[0]
    if kind == "line":
        longer = state[1] + bytes([byte])
        if longer in heads:  # a complete head: the first label spelt so
            i = heads.index(longer)
            return None if done >> i & 1 else (("start", i, True), done | 1 << i)
        free = any(h.startswith(longer) and not done >> i & 1 for i, h in enumerate(heads))
        return (("line", longer), done) if free else None
    if kind == "start":
        return (("none", 1), done) if state[2] and byte == NONE_WORD[0] else None
    if kind == "none":
        k = state[1]
        if byte != NONE_WORD[k]:
            return None
        return (("line_end",) if k + 1 == len(NONE_WORD) else ("none", k + 1)), done
    if kind == "line_end":
        return (("line", b""), done) if byte == ord("\n") else None
    if byte == ord("\t"):
        return ("start", state[1], False), done
    return (("line", b""), done) if byte == ord("\n") else None


def walk(heads: list[bytes], state: tuple, data: bytes) -> tuple[tuple, int] | None:
    done = 0
    for byte in data:
        moved = step(heads, state, done, byte)
        if moved is None:
            return None
        state, done = moved
    return state, done


def reference(labels: tuple[str, ...], vocab: TokenBytes) -> tuple[list[set], list[set]]:
    """Per state, its (token, state, done, need) steps and its glue heads, token by token."""
    heads = [label.encode() + LABEL_SEPARATOR for label in labels]
    states = reference_states(labels)
    index = {s: i for i, s in enumerate(states)}
    # A glue head is a token's proper prefix: a value starts inside the token.
    proper = {data[:n] for data in vocab.ordered for n in range(1, len(data))}
    steps: list[set] = [set() for _ in states]
    glues: list[set] = [set() for _ in states]
    for s, state in enumerate(states):
        if state[0] == "start":
            glues[s].add((b"", state[1], 0))
        for token, data in enumerate(vocab.by_id):
            walked = data and walk(heads, state, data)
            if walked:
                following, done = walked
                below = (
                    sum(1 << i for i, h in enumerate(heads) if h.startswith(following[1]))
                    if following[0] == "line"
                    else 0
                )
                need = below & ~done if following[0] == "line" else -1
                steps[s].add((token, index[following], done, need))
        for data in proper:
            walked = walk(heads, state, data)
            if walked and walked[0][0] == "start":
                glues[s].add((data, walked[0][1], walked[1]))
    return steps, glues


def table_sets(table: ChunkTable, sentinel: int) -> tuple[list[set], list[set]]:
    token, state, done, need = table.steps
    steps = [
        {
            tuple(int(a[r, k]) for a in (token, state, done, need))
            for k in range(token.shape[1])
            if token[r, k] != sentinel
        }
        for r in range(token.shape[0])
    ]
    return steps, [{(g.head, g.label, g.done) for g in row} for row in table.glues]


@pytest.mark.parametrize(
    "labels", [("甲方", "乙方"), ("甲方", "甲方地址", "金额"), ("a", "a: b"), ("a: b", "a", "None"), ("乙方", "乙方")]
)
def test_tables_are_the_answer_format_token_by_token(labels: tuple[str, ...]) -> None:
    vocab = vocabulary(LABELS)
    table = build_chunk_table(labels, TokenRuns(vocab))
    assert table.line_prefix == [s[1] if s[0] == "line" else None for s in reference_states(labels)]
    steps, glues = table_sets(table, len(vocab.by_id))
    expected_steps, expected_glues = reference(labels, vocab)
    assert steps == expected_steps
    assert glues == expected_glues
    assert sum(map(len, steps)) > 3 * len(steps)  # the vocabulary does cross heads


def test_a_shared_token_runs_builds_the_tables_a_cold_one_does() -> None:
    vocab = vocabulary(LABELS)
    shared = TokenRuns(vocab)
    rng = random.Random(0)
    subsets = [tuple(rng.sample(LABELS, rng.randint(1, 5))) for _ in range(40)]
    for labels in subsets:
        warm, cold = build_chunk_table(labels, shared), build_chunk_table(labels, TokenRuns(vocab))
        for a, b in zip(warm.steps, cold.steps, strict=True):
            np.testing.assert_array_equal(a, b)
        assert warm.glues == cold.glues
        assert (warm.eos, warm.exit_state, warm.line_prefix) == (cold.eos, cold.exit_state, cold.line_prefix)
