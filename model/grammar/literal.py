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
TAB, NEWLINE = b"\t", b"\n"
# How a state admits end-of-sequence: never, when every label is answered, or also only where the
# value so far may end (the way out of a value).
EOS_NEVER, EOS_IF_COMPLETE, EOS_IF_COMPLETE_AND_ENDED = 0, 1, 2


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


class TokenRuns:
    """Per vocabulary: the token ids spelling each prefix of a byte string, as far as some token
    starts with them. Memoised for the engine's life: the strings are label heads' suffixes (and the
    literal bytes before them), which recur across chunks even when the label subsets differ."""

    def __init__(self, vocab: TokenBytes) -> None:
        self.vocab = vocab
        self._found: dict[bytes, tuple[tuple[int, ...], ...]] = {}

    def __call__(self, data: bytes) -> tuple[tuple[int, ...], ...]:
        """Item n: the ids spelling data[: n + 1]; as many items as some token starts with."""
        found = self._found.get(data)
        if found is None:
            reach = _token_prefix_length(self.vocab, data)
            found = self._found[data] = tuple(self.vocab.ids.get(data[:n], ()) for n in range(1, reach + 1))
        return found


class _Builder:
    def __init__(self, labels: tuple[str, ...], runs: TokenRuns) -> None:
        self.runs = runs
        self.heads = [label.encode() + LABEL_SEPARATOR for label in labels]
        prefixes = sorted({h[:n] for h in self.heads for n in range(len(h))}, key=lambda p: (len(p), p))
        self.states: list[tuple] = [("line", p) for p in prefixes]
        self.states += [("start", i, first) for i in range(len(labels)) for first in (True, False)]
        self.states += [("none", k) for k in range(1, len(NONE_WORD))] + [("line_end",)]
        self.states += [("exit", i) for i in range(len(labels))]
        self.index = {s: i for i, s in enumerate(self.states)}
        # Per line prefix, the labels whose heads pass through it, as a bit mask.
        self.below = dict.fromkeys(prefixes, 0)
        for i, h in enumerate(self.heads):
            for n in range(len(h) + 1):
                if h[:n] in self.below:
                    self.below[h[:n]] |= 1 << i
        # Per label, per byte of its head, where reading up to it leads: (state, labels below, -1) at a
        # line prefix, or (state, 0, j) where it completes a head (the first label with those bytes).
        complete: dict[bytes, int] = {}
        for i, h in enumerate(self.heads):
            complete.setdefault(h, i)
        self.along = [[self._reached(h[:n], complete) for n in range(1, len(h) + 1)] for h in self.heads]

    def _reached(self, head: bytes, complete: dict[bytes, int]) -> tuple[int, int, int]:
        j = complete.get(head, -1)
        if j >= 0:
            return self.index[("start", j, True)], 0, j
        return self.index[("line", head)], self.below[head], -1

    def walk(self, start: tuple) -> tuple[list[tuple[int, int, int, int]], list[Glue]]:
        """The (token, state, done, need) steps and glue heads of the literal bytes from `start`, as
        deep as some token still starts with them."""
        steps: list[tuple[int, int, int, int]] = []
        glues: list[Glue] = []
        if start[0] == "line":
            self._line(start[1], b"", 0, steps, glues)
        else:
            if start[0] == "start":
                glues.append(Glue(b"", start[1], 0))
            self._fixed(start, b"", 0, steps, glues)
        return steps, glues

    def _line(self, prefix: bytes, before: bytes, done: int, steps: list, glues: list[Glue]) -> None:
        """From the line state `prefix`, `before` read so far: along each head below it whose label is
        not done, a run of bytes at a time (a byte trie's walk re-walked every head from every state).
        Heads sharing a prefix share its states: each state is reached once."""
        seen: set[int] = set()
        free = self.below[prefix] & ~done
        for i, head in enumerate(self.heads):
            if not free >> i & 1:
                continue
            run = self.runs(before + head[len(prefix) :])
            offset = len(prefix) - len(before)
            for n in range(len(before), len(run)):
                state, below, completes = self.along[i][offset + n]
                if completes < 0:
                    # Ending inside a head, one of the labels below must still be free.
                    if state not in seen:
                        seen.add(state)
                        steps.extend((token, state, done, below & ~done) for token in run[n])
                    continue
                # A complete head (this label's, or a shorter one on its way) ends the line.
                if state not in seen and not done >> completes & 1:
                    seen.add(state)
                    data = before + head[len(prefix) : offset + n + 1]
                    self._step(data, run[n], ("start", completes, True), done | 1 << completes, steps, glues)
                break

    def _fixed(self, state: tuple, before: bytes, done: int, steps: list, glues: list[Glue]) -> None:
        """From a state with fixed next bytes (None's letters, tab, newline), `before` read so far."""
        for byte, following in _fixed_moves(state):
            data = before + byte
            run = self.runs(data)
            if len(run) < len(data):
                continue
            if following[0] == "line":
                need = self.below[b""] & ~done
                steps.extend((token, self.index[following], done, need) for token in run[-1])
                self._line(b"", data, done, steps, glues)
            else:
                self._step(data, run[-1], following, done, steps, glues)

    def _step(self, data: bytes, ids: tuple[int, ...], following: tuple, done: int, steps: list, glues: list) -> None:
        """`data` (spelt by `ids`) read into a state that is no line state: its tokens, a glue head
        where a value may start inside a token, and the walk on from there."""
        state = self.index[following]
        steps.extend((token, state, done, -1) for token in ids)
        if following[0] == "start" and _extends_some_token(self.runs.vocab, data):
            glues.append(Glue(data, following[1], done))
        self._fixed(following, data, done, steps, glues)


def _fixed_moves(state: tuple) -> list[tuple[bytes, tuple]]:
    """(byte, next state) for each literal byte that may follow a state that is no line state."""
    kind = state[0]
    if kind == "start":
        return [(NONE_WORD[:1], ("none", 1))] if state[2] else []
    if kind == "none":
        k = state[1]
        return [(NONE_WORD[k : k + 1], ("line_end",) if k + 1 == len(NONE_WORD) else ("none", k + 1))]
    if kind == "line_end":
        return [(NEWLINE, ("line", b""))]
    return [(TAB, ("start", state[1], False)), (NEWLINE, ("line", b""))]


def build_chunk_table(labels: tuple[str, ...], runs: TokenRuns) -> ChunkTable:
    """The chunk's literal tables; `runs` (one per vocabulary) may be shared by every chunk."""
    builder = _Builder(labels, runs)
    walked = [builder.walk(s) for s in builder.states]
    eos = [
        EOS_IF_COMPLETE if s[0] == "line_end" else EOS_IF_COMPLETE_AND_ENDED if s[0] == "exit" else EOS_NEVER
        for s in builder.states
    ]
    return ChunkTable(
        labels=labels,
        heads=builder.heads,
        steps=_step_arrays([w[0] for w in walked], len(runs.vocab.by_id)),
        glues=[w[1] for w in walked],
        eos=eos,
        exit_state=[builder.index[("exit", i)] for i in range(len(labels))],
        line_prefix=[s[1] if s[0] == "line" else None for s in builder.states],
    )


def _token_prefix_length(vocab: TokenBytes, data: bytes) -> int:
    """The length of the longest prefix of `data` that some token starts with: the longest common
    prefix of `data` with any sorted string is the one with a neighbour of where `data` would sort."""
    i = bisect.bisect_left(vocab.ordered, data)
    return max(_common_length(data, vocab.ordered[j]) for j in (i - 1, i) if 0 <= j < len(vocab.ordered))


def _common_length(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _extends_some_token(vocab: TokenBytes, prefix: bytes) -> bool:
    """Whether some token is `prefix` and more."""
    i = bisect.bisect_right(vocab.ordered, prefix)
    return i < len(vocab.ordered) and vocab.ordered[i].startswith(prefix)


def _no_steps(states: int, width: int, sentinel: int) -> tuple[np.ndarray, ...]:
    """(token, state, done, need) arrays [states, width] holding no step: the sentinel token, no next
    state, no labels done, no condition."""
    return tuple(np.full((states, width), fill, dtype=np.int64) for fill in (sentinel, -1, 0, -1))


def _step_arrays(rows: list[list[tuple[int, int, int, int]]], sentinel: int) -> tuple[np.ndarray, ...]:
    """Each state's (token, state, done, need) steps as four arrays [states, widest]; the sentinel pads."""
    width = max(1, *(len(r) for r in rows)) if rows else 1
    out = _no_steps(len(rows), width, sentinel)
    counts = [len(row) for row in rows]
    flat = np.array([step for row in rows for step in row], dtype=np.int64).reshape(-1, 4)
    at = np.repeat(np.arange(len(rows)), counts)
    column = np.arange(len(flat)) - np.repeat(np.cumsum([0, *counts[:-1]]), counts)
    for array, values in zip(out, flat.T, strict=True):
        array[at, column] = values
    return out


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
