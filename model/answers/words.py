"""Where a source text's words begin and end, by jieba's segmentation: the ruler of the value-boundary check.

jieba (MIT, its dictionary ships in the wheel) is loaded once per process, quietly, on first use and
not at import, so `model/` stays importable where only torch and transformers are installed. Its
segmentation is deterministic (dictionary DAG plus a Viterbi HMM for unknown words). A text is
segmented once, by both the plain cutter and the part-of-speech tagger (they can differ; they share
each block's DAG and route), and the result is memoised: the validation loop and the interpretation
check every value of a document against the same segmentation. The tagger is jieba's with its HMM
decoded by numpy (model/answers/tagger.py): the same tags, under a third of the time.

jieba often splits an unknown three-character name into surname + given name (宋/志远, 罗文/斌,
刘/桂兰): every edge of both segmentations counts as a word edge, so a correct full name is never cut,
and the person rules of `model/answers/checks.py` use `name_heads` and `name_tails` to catch the
surname or the last character left off.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from dataclasses import dataclass
from typing import Any

from model.values.lexicon import organisation_ok, person_ok, surnames

# Tags of proper names of people, places and organisations (nr, nrfg, nrt, ns, nt ...).
NAME_TAGS = ("nr", "ns", "nt")
# One-character words with these tags are function words (prepositions, conjunctions, particles,
# adverbs, pronouns, verbs, locatives, modal and other particles, punctuation): 于 or 和 before a
# name is no surname of it.
FUNCTION_TAGS = tuple("pcudrvfyeox")
# A one-character word tagged as part of a name, or as an unknown morpheme (zg), after a person's value.
NAME_PART_TAGS = ("nr", "nrfg", "ns", "zg")


@dataclass(frozen=True)
class Words:
    """A text's word edges (character offsets, 0 and the end included) and the places where a
    person's name may have been cut: inside a multi-character name-tagged word, before a one-character
    word that can lead a name (`name_heads`, their starts) or that can end one (`name_tails`)."""

    edges: frozenset[int]
    inside_names: frozenset[int]
    name_heads: frozenset[int]
    name_tails: frozenset[int]
    # Names the tagger found, in text order: people's (`nr`, or a surname + given name it split)
    # and organisations' (`nt`) that the shipped lexicons accept.
    persons: tuple[str, ...] = ()
    organisations: tuple[str, ...] = ()
    # The tagger's words: (start, end, part-of-speech tag), in text order.
    tagged: tuple[tuple[int, int, str], ...] = ()


@functools.cache
def _segmenters() -> tuple[Any, Any]:
    import jieba

    from model.answers.tagger import route_sharing_tokenizer, tagger

    jieba.setLogLevel(logging.WARNING)  # its "Building prefix dict" lines are no news in a worker's log
    tokenizer = route_sharing_tokenizer()
    tokenizer.initialize()
    return tokenizer, tagger(tokenizer)


def load_segmenters() -> None:
    """Load jieba's dictionaries and compile the tagger's Viterbi now: an engine does so when it is
    built, not in its first batch."""
    from model.answers.tagger import viterbi

    _segmenters()
    viterbi("未知")


# Texts whose words stay known: a few micro-batches' worth (preparation, the checks and the
# validation loop read a document's words several times).
WORDS_KEPT = 256


class _Known:
    """The texts' words, oldest dropped first; words segmented in another process (the preparing
    processes, model/prepare_pool.py) are handed in with `remember`, so no text is segmented twice."""

    def __init__(self) -> None:
        self._words: dict[str, Words] = {}
        self._lock = threading.Lock()  # the prepare-ahead thread and the engine's remember too

    def __call__(self, text: str) -> Words:
        found = self._words.get(text)
        return found if found is not None else self.remember(text, _segment(text))

    def get(self, text: str) -> Words | None:
        return self._words.get(text)

    def remember(self, text: str, words: Words) -> Words:
        with self._lock:
            if len(self._words) >= WORDS_KEPT:
                del self._words[next(iter(self._words))]
            self._words[text] = words
        return words

    def cache_clear(self) -> None:
        self._words.clear()


def _segment(text: str) -> Words:
    tokenizer, tagger = _segmenters()
    edges = {0, len(text), *itertools.accumulate(map(len, tokenizer.cut(text, HMM=True)))}
    pairs = [(p.word, p.flag) for p in tagger.cut(text, HMM=True)]
    tokenizer.forget()
    ends = list(itertools.accumulate(len(word) for word, _ in pairs))
    starts = [0, *ends][: len(ends)]
    edges.update(ends)
    inside: set[int] = set()
    heads: set[int] = set()
    tails: set[int] = set()
    for (_, flag), start, end in zip(pairs, starts, ends, strict=True):
        if end - start > 1:
            if flag.startswith(NAME_TAGS):
                inside.update(range(start + 1, end))
        elif not flag.startswith(FUNCTION_TAGS):
            heads.add(start)
            if flag in NAME_PART_TAGS:
                tails.add(start)
    return Words(
        frozenset(edges),
        frozenset(inside),
        frozenset(heads),
        frozenset(tails),
        _persons(pairs),
        _organisations(pairs),
        tuple(zip(starts, ends, [flag for _, flag in pairs], strict=True)),
    )


# A text's words: segmented once, then known (threads may race to segment one text: same words).
words_of = _Known()


def _persons(pairs: list[tuple[str, str]]) -> tuple[str, ...]:
    found = []
    for (word, flag), (after, after_flag) in zip(pairs, [*pairs[1:], ("", "")], strict=False):
        if flag.startswith("nr") and 2 <= len(word) <= 4 and person_ok(word):
            found.append(word)
        # An unknown name split in two: 宋/nr 志远/nrfg, 潘/nr 建华/nz; 刘/zg 桂兰/ns is seen too, but not taken.
        split = len(word) == 1 and flag.startswith("nr") and after_flag.startswith(("nr", "nz", "zg"))
        if split and 1 <= len(after) <= 2 and word in surnames() and person_ok(word + after):
            found.append(word + after)
    return tuple(dict.fromkeys(found))


def _organisations(pairs: list[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(word for word, flag in pairs if flag == "nt" and organisation_ok(word)))
