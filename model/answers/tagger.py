"""jieba's part-of-speech tagger with its hidden Markov model decoded by a compiled Viterbi.

jieba.posseg runs its HMM (256 states: word position B/M/E/S times tag) over each run of characters
its dictionary does not cover, in pure Python: on the engine benchmark's documents that took 8.1 ms
a document (`python -m ops.bench.tagger`), more than the rest of the host's work on it. `Tagger` is
jieba's own `POSTokenizer` with the same tables (shipped in jieba's wheel); only the Viterbi is
compiled (numba, as the host grammar's step: numpy's calls per character cost more than the few
hundred additions a character needs). It adds the same float64 terms in the same order and breaks
ties the way jieba's `max` over `(score, state)` tuples does (the larger state wins), so its output
is jieba's to the tag: `tests/test_words.py` checks that on every corpus.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np

MIN_FLOAT = -3.14e100  # jieba's score of an emission its table lacks
MIN_INF = float("-inf")  # and of a transition it lacks


class _Model:
    """jieba.posseg's tables as arrays, states in Python's tuple order (the order of jieba's ties)."""

    def __init__(self) -> None:
        from jieba.posseg.char_state_tab import P as char_states
        from jieba.posseg.prob_emit import P as emit
        from jieba.posseg.prob_start import P as start
        from jieba.posseg.prob_trans import P as trans

        self.states: list[tuple[str, str]] = sorted(trans)
        index = {state: i for i, state in enumerate(self.states)}
        n = len(self.states)
        self.start = np.array([start[s] for s in self.states])
        self.trans = np.full((n, n), MIN_INF)
        for s, nexts in trans.items():
            for t, p in nexts.items():
                self.trans[index[s], index[t]] = p
        self.follows = self.trans > MIN_INF  # jieba's `trans_p[x].keys()`
        self.leads = self.follows.any(axis=1)  # `len(trans_p[x]) > 0`
        self._emit = emit
        self._char_states = {c: np.isin(np.arange(n), [index[s] for s in ss]) for c, ss in char_states.items()}
        self._all = np.ones(n, dtype=bool)

    def allowed(self, char: str) -> np.ndarray:
        return self._char_states.get(char, self._all)

    @functools.lru_cache(maxsize=8192)  # noqa: B019 - one model per process, kept for its life
    def emission(self, char: str) -> np.ndarray:
        return np.array([self._emit[s].get(char, MIN_FLOAT) for s in self.states])


@functools.cache
def _model() -> _Model:
    return _Model()


def viterbi(text: str) -> list[tuple[str, str]]:
    """jieba.posseg.viterbi's route for `text` (a run of Han characters), state by state."""
    m = _model()
    allowed = np.stack([m.allowed(char) for char in text])
    emission = np.stack([m.emission(char) for char in text])
    route = _route(m.start, m.trans, m.follows, m.leads, allowed, emission)
    return [m.states[s] for s in route]


@numba.njit(cache=True)
def _route(start, trans, follows, leads, allowed, emission):
    """The best state route through a run's characters (rows of `allowed` and `emission`), as jieba
    finds it: each character's states limited to those its table allows that some live state leads
    to (all of those where none is allowed, every state where none is led to), each state's best
    predecessor by (score + transition) + emission, float64 in jieba's order, ties to the larger
    state (jieba's `max` over (score, state) tuples), and the end state likewise."""
    n = len(start)
    length = len(allowed)
    live = allowed[0].copy()
    score = np.full(n, -np.inf)
    for s in range(n):
        if live[s]:
            score[s] = start[s] + emission[0, s]
    back = np.zeros((length, n), dtype=np.int64)
    for t in range(1, length):
        prev = np.flatnonzero(live & leads)
        expected = np.zeros(n, dtype=np.bool_)
        for q in prev:
            expected |= follows[q]
        now = allowed[t] & expected
        if not now.any():
            now = expected if expected.any() else np.ones(n, dtype=np.bool_)
        fresh = np.full(n, -np.inf)
        for s in range(n):
            if not now[s]:
                continue
            best, best_total = prev[0], (score[prev[0]] + trans[prev[0], s]) + emission[t, s]
            for q in prev[1:]:
                total = (score[q] + trans[q, s]) + emission[t, s]
                if total >= best_total:
                    best, best_total = q, total
            fresh[s] = best_total
            back[t, s] = best
        score = fresh
        live = now
    state = -1
    for s in range(n):
        if live[s] and (state < 0 or score[s] >= score[state]):
            state = s
    route = np.empty(length, dtype=np.int64)
    route[length - 1] = state
    for t in range(length - 1, 0, -1):
        state = back[t, state]
        route[t - 1] = state
    return route


@functools.lru_cache(maxsize=1 << 16)
def tag_run(run: str) -> tuple[tuple[str, str], ...]:
    """The words and tags jieba's HMM gives a run of Han characters its dictionary does not cover.

    A pure function of the run and jieba's tables, so memoised for the process's life like the
    emissions: the runs are short (one to three characters on the engine benchmark's documents) and
    recur (2,277 runs in 64 documents, 296 of them distinct)."""
    route = viterbi(run)
    words = []
    begin = after = 0
    for i, (position, tag) in enumerate(route):
        if position == "B":
            begin = i
        elif position == "E":
            words.append((run[begin : i + 1], tag))
            after = i + 1
        elif position == "S":
            words.append((run[i], tag))
            after = i + 1
    if after < len(run):
        words.append((run[after:], route[after][1]))
    return tuple(words)


def tagger(tokenizer: Any) -> Any:
    """A `jieba.posseg.POSTokenizer` over `tokenizer` whose HMM step is `tag_run`, and which reads a
    block of Han characters' dictionary words straight from jieba-rs (`route_sharing_tokenizer`)."""
    import jieba.posseg
    import rjieba

    pair = jieba.posseg.pair

    class Tagger(jieba.posseg.POSTokenizer):
        # jieba's private `__cut`, the only caller of its Viterbi; the rest of the tokenizer is its own.
        def _POSTokenizer__cut(self, sentence: str) -> Iterator[jieba.posseg.pair]:
            for word, tag in tag_run(sentence):
                yield pair(word, tag)

        def _POSTokenizer__cut_DAG(self, sentence: str) -> Iterator[jieba.posseg.pair]:
            # jieba's own loop over a block's best route, which for a block of Han characters is
            # jieba-rs's cut without its HMM (`calc` below): one-character words gather in a buffer
            # that is tagged by the dictionary, or by the HMM where jieba does not know it as a word.
            if not _HAN.fullmatch(sentence):
                yield from super()._POSTokenizer__cut_DAG(sentence)
                return
            tags, freq = self.word_tag_tab, self.tokenizer.FREQ
            buf = ""
            for word in [*rjieba.cut(sentence, False), ""]:
                if len(word) == 1:
                    buf += word
                    continue
                if len(buf) == 1:
                    yield pair(buf, tags.get(buf, "x"))
                elif buf and not freq.get(buf):
                    yield from self._POSTokenizer__cut_detail(buf)
                else:
                    for char in buf:
                        yield pair(char, tags.get(char, "x"))
                buf = ""
                if word:
                    yield pair(word, tags.get(word, "x"))

    return Tagger(tokenizer)


# A block of Han characters alone: jieba-rs cuts it as jieba does (below).
_HAN = re.compile("[\u4e00-\u9fd5]+")
# What jieba's cut without its HMM gathers into one word when the route steps over it one character
# at a time (its `re_eng`, each character).
_ASCII_RUN = re.compile("[a-zA-Z0-9]{2,}")


def _native_route(block: str, freq: dict[str, int]) -> dict[int, tuple[float, int]] | None:
    """jieba's best route through a block holding digits or Latin letters, read off jieba-rs's cut
    without its HMM, which is jieba's (on the 1,647 such blocks of the corpora): each word is a step
    of the route, except a run of ASCII letters and digits, which jieba's cut gathers from one-character
    steps. A run that is no dictionary word can only be that, so it is split again; one that is may be
    either, so it is left to jieba's own code: None."""
    import rjieba

    route: dict[int, tuple[float, int]] = {}
    at = 0
    for word in rjieba.cut(block, False):
        if _ASCII_RUN.fullmatch(word):
            if freq.get(word):
                return None
            route.update((i, (0.0, i)) for i in range(at, at + len(word)))
        else:
            route[at] = (0.0, at + len(word) - 1)
        at += len(word)
    return route


# `get_DAG`'s answer for such a block: `calc` then reads the route from jieba-rs.
_NATIVE: dict[int, list[int]] = {}


def route_sharing_tokenizer() -> Any:
    """A `jieba.Tokenizer` that cuts blocks of Han characters natively and finds every other block's
    dictionary DAG and best route once per text.

    A block of Han characters alone (most of a Chinese text) is cut by jieba-rs (`rjieba`, MIT,
    the same dictionary in its wheel): its best route and its HMM cut of such a block are jieba's,
    word for word (on the 13,987 such blocks of the hand-written and generated corpora, and checked
    on every corpus by tests/test_words.py), at a twentieth of the time. Where a block holds digits or
    Latin letters (2021-07-01, TI-RADS) their HMM cuts differ, so jieba's own code cuts those, over
    the route it would find, read off jieba-rs's cut without the HMM (`_native_route`: a sixth off a
    text's segmentation on the engine benchmark's documents).

    A text is segmented by the plain cutter and by the tagger (model/answers/words.py), and both ask
    the tokenizer for each block's DAG and then its route: the same pure function of the block and
    the dictionary. They are computed once; `forget` drops them after the text, so no
    text's work is kept for another (a worker sees each text once). A route is reused only with the
    DAG it was found for: a thread forgetting another's blocks costs a recomputation, never a wrong route.
    """
    import jieba
    import rjieba

    class Tokenizer(jieba.Tokenizer):
        def __init__(self) -> None:
            super().__init__()
            self._routes: dict[str, tuple[dict[int, list[int]], dict[int, tuple[float, int]]]] = {}

        def get_DAG(self, sentence: str) -> dict[int, list[int]]:
            if _HAN.fullmatch(sentence):
                return _NATIVE
            found = self._routes.get(sentence)
            if found is None:
                route = _native_route(sentence, self.FREQ)
                if route is not None:
                    found = self._routes[sentence] = ({}, route)  # a DAG of its own: `calc` takes the route
                else:
                    dag, route = super().get_DAG(sentence), {}
                    super().calc(sentence, dag, route)
                    found = self._routes[sentence] = (dag, route)
            return found[0]

        def calc(self, sentence: str, DAG: dict[int, list[int]], route: dict) -> None:
            if DAG is _NATIVE:
                # Callers read only each word's last character off the route (`route[x][1]`).
                at = 0
                for word in rjieba.cut(sentence, False):
                    route[at] = (0.0, at + len(word) - 1)
                    at += len(word)
                return
            found = self._routes.get(sentence)
            if found is not None and found[0] is DAG:
                route.update(found[1])
            else:
                super().calc(sentence, DAG, route)

        def _Tokenizer__cut_DAG(self, sentence: str) -> Iterator[str]:
            # jieba's private cut of one block with its HMM, the plain cutter's only step per block.
            if _HAN.fullmatch(sentence):
                yield from rjieba.cut(sentence, True)
            else:
                yield from super()._Tokenizer__cut_DAG(sentence)

        def forget(self) -> None:
            self._routes = {}

    return Tokenizer()
