"""The fixed part of SeqGPT's answer format for one label chunk, as token tables.

    answer := line ("\\n" line)* EOS        one line per requested label, each label once
    line   := label ": " ("None" | value ("\\t" value)*)

Everything but the values' bytes is literal: label heads (`甲方: `), `None`, tab and newline. Its
states are few (a trie over the chunk's heads, a value start per label, the letters of `None`, a line
end, and the way out of a value per label), and which labels are answered is kept apart, as a bit
mask per row, so the tables do not grow with the orders labels may come in. For each state the
tokens a literal walk may take are listed once, with where they lead and on what condition:

- `done`: the labels whose heads the token completes (each must still be unanswered);
- `need`: when the token ends inside a head, the labels whose heads pass through there, less those
  the token itself completed (one of them must still be unanswered); -1 where there is no such
  condition.

Where a walk reaches a value's start inside a token (BPE glues a space to a word: ` 上海`), the
state lists a *glue* head: the bytes before the value, and the label. Which tokens follow a glue head
depends on the document, so model/grammar/source.py finds them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from model.grammar.token_bytes import TokenBytes

NONE_WORD = b"None"
LABEL_SEPARATOR = b": "
TAB, NEWLINE = 9, 10
# How a state admits end-of-sequence: never, when every label is answered, or also only where the
# value so far may end (the way out of a value).
EOS_NEVER, EOS_IF_COMPLETE, EOS_IF_COMPLETE_AND_ENDED = 0, 1, 2


@dataclass(frozen=True)
class LiteralStep:
    token: int
    state: int
    done: int
    need: int


@dataclass(frozen=True)
class Glue:
    head: bytes
    label: int
    done: int


@dataclass
class ChunkTable:
    """Literal states of one label chunk. State 0 is a line's start. `steps` holds each state's
    literal steps as (token, state, done, need) arrays [states, widest], padded with the token
    `len(vocab)`: built once per chunk, so a batch's tables are a few array copies."""

    labels: tuple[str, ...]
    heads: list[bytes]
    steps: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    glues: list[list[Glue]]
    eos: list[int]
    exit_state: list[int]  # per label, the state of "inside a value of this label"
    line_prefix: list[bytes | None]  # per state, the head bytes so far when it is a line state

    @property
    def complete(self) -> int:
        return (1 << len(self.labels)) - 1


class _Builder:
    def __init__(self, labels: tuple[str, ...], vocab: TokenBytes) -> None:
        self.vocab = vocab
        self.heads = [label.encode() + LABEL_SEPARATOR for label in labels]
        prefixes = sorted({h[:n] for h in self.heads for n in range(len(h))}, key=lambda p: (len(p), p))
        self.states: list[tuple] = [("line", p) for p in prefixes]
        self.states += [("start", i, first) for i in range(len(labels)) for first in (True, False)]
        self.states += [("none", k) for k in range(1, len(NONE_WORD))] + [("line_end",)]
        self.states += [("exit", i) for i in range(len(labels))]
        self.index = {s: i for i, s in enumerate(self.states)}

        # The heads' trie: per line prefix, its next bytes and where each leads (a label completed, or
        # a longer prefix), and the labels whose heads pass through it.
        self.below_mask = {p: sum(1 << i for i, h in enumerate(self.heads) if h.startswith(p)) for p in prefixes}
        self.trie: dict[bytes, list[tuple[int, tuple, int]]] = {p: [] for p in prefixes}
        for p in prefixes:
            for b in sorted({h[len(p)] for h in self.heads if h.startswith(p) and len(h) > len(p)}):
                longer = p + bytes([b])
                done = next((i for i, h in enumerate(self.heads) if h == longer), -1)
                self.trie[p].append((b, ("start", done, True) if done >= 0 else ("line", longer), done))
        self._fixed: dict[tuple, list[tuple[int, tuple]]] = {}

    def moves(self, state: tuple, done: int) -> list[tuple[int, tuple, int]]:
        """(byte, next state, labels done after it) for each literal byte that may follow `state`."""
        if state[0] == "line":
            out = []
            for b, following, completes in self.trie[state[1]]:
                if completes >= 0:
                    if not done >> completes & 1:
                        out.append((b, following, done | 1 << completes))
                elif self.below_mask[following[1]] & ~done:
                    out.append((b, following, done))
            return out
        fixed = self._fixed.get(state)
        if fixed is None:
            fixed = self._fixed[state] = self._fixed_moves(state)
        return [(b, following, done) for b, following in fixed]

    @staticmethod
    def _fixed_moves(state: tuple) -> list[tuple[int, tuple]]:
        kind = state[0]
        if kind == "start":
            return [(NONE_WORD[0], ("none", 1))] if state[2] else []
        if kind == "none":
            k = state[1]
            return [(NONE_WORD[k], ("line_end",) if k + 1 == len(NONE_WORD) else ("none", k + 1))]
        if kind == "line_end":
            return [(NEWLINE, ("line", b""))]
        return [(TAB, ("start", state[1], False)), (NEWLINE, ("line", b""))]

    def walk(self, start: tuple) -> tuple[list[LiteralStep], list[Glue]]:
        """Breadth-first over the literal bytes from `start`, as deep as some token still starts with them."""
        steps: list[LiteralStep] = []
        glues: list[Glue] = []
        if start[0] == "start":
            glues.append(Glue(b"", start[1], 0))
        frontier: list[tuple[bytes, tuple, int]] = [(b"", start, 0)]
        while frontier:
            head, state, done = frontier.pop()
            for b, following, now_done in self.moves(state, done):
                longer = head + bytes([b])
                if not _starts_some_token(self.vocab, longer):
                    continue
                # Ending inside a head, one of the labels below must still be free; -1: no condition.
                need = self.below_mask[following[1]] & ~now_done if following[0] == "line" else -1
                for token in self.vocab.ids.get(longer, ()):
                    steps.append(LiteralStep(token, self.index[following], now_done, need))
                if following[0] == "start" and _extends_some_token(self.vocab, longer):
                    glues.append(Glue(longer, following[1], now_done))
                frontier.append((longer, following, now_done))
        return steps, glues


def build_chunk_table(labels: tuple[str, ...], vocab: TokenBytes) -> ChunkTable:
    builder = _Builder(labels, vocab)
    walked = [builder.walk(s) for s in builder.states]
    eos = [
        EOS_IF_COMPLETE if s[0] == "line_end" else EOS_IF_COMPLETE_AND_ENDED if s[0] == "exit" else EOS_NEVER
        for s in builder.states
    ]
    return ChunkTable(
        labels=labels,
        heads=builder.heads,
        steps=_step_arrays([w[0] for w in walked], len(vocab.by_id)),
        glues=[w[1] for w in walked],
        eos=eos,
        exit_state=[builder.index[("exit", i)] for i in range(len(labels))],
        line_prefix=[s[1] if s[0] == "line" else None for s in builder.states],
    )


def _starts_some_token(vocab: TokenBytes, prefix: bytes) -> bool:
    i = bisect.bisect_left(vocab.ordered, prefix)
    return i < len(vocab.ordered) and vocab.ordered[i].startswith(prefix)


def _extends_some_token(vocab: TokenBytes, prefix: bytes) -> bool:
    """Whether some token is `prefix` and more."""
    i = bisect.bisect_right(vocab.ordered, prefix)
    return i < len(vocab.ordered) and vocab.ordered[i].startswith(prefix)


def _no_steps(states: int, width: int, sentinel: int) -> tuple[np.ndarray, ...]:
    """(token, state, done, need) arrays [states, width] holding no step: the sentinel token, no next
    state, no labels done, no condition."""
    return tuple(np.full((states, width), fill, dtype=np.int64) for fill in (sentinel, -1, 0, -1))


def _step_arrays(rows: list[list[LiteralStep]], sentinel: int) -> tuple[np.ndarray, ...]:
    """Each state's steps as (token, state, done, need) arrays [states, widest]; the sentinel pads."""
    width = max(1, *(len(r) for r in rows)) if rows else 1
    token, state, done, need = _no_steps(len(rows), width, sentinel)
    for r, row in enumerate(rows):
        for k, step in enumerate(row):
            token[r, k], state[r, k], done[r, k], need[r, k] = step.token, step.state, step.done, step.need
    return token, state, done, need


def pad_steps(tables: list[ChunkTable], sentinel: int) -> tuple[np.ndarray, ...]:
    """The literal steps of several chunk tables, states concatenated in order (each table's states
    renumbered after the ones before), padded to one width with the sentinel token."""
    widest = max([1] + [t.steps[0].shape[1] for t in tables])
    states = sum(len(t.eos) for t in tables)
    out = _no_steps(states, widest, sentinel)
    offset = 0
    for t in tables:
        rows = slice(offset, offset + len(t.eos))
        for array, part in zip(out, t.steps, strict=True):
            array[rows, : part.shape[1]] = part
        following = out[1][rows]
        following[following >= 0] += offset
        offset += len(t.eos)
    return out
