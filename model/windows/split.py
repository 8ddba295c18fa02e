"""Documents longer than the model's window, read whole: split into overlapping windows, merged back.

SeqGPT reads 1,024 tokens; contracts and medical histories run to tens of thousands of characters.
Cutting them (the reference code drops the head, `fit_text` the tail) leaves values nobody read. A
long document is instead split into windows that each fit the prompt of every label chunk,
overlapping by a margin that holds a long value whole, cut after a sentence or line end where one
lies near the cut. Each window is decoded like a document; its spans are moved to their offsets in
the original text and the windows' answers merged per label (`merge_windows`).

The split is here, the merge in `model/windows/merge.py`; both are pure: they see character offsets
and token ends, never a model. `model/windows/engine.py` wraps an engine with them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

import msgspec

SENTENCE_ENDS = frozenset("。！？；\n")


class WindowSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How long documents are read (`SEQSTREAM_WINDOWS__*`)."""

    # Tokens two neighbouring windows share: a value this long or shorter lies whole in one of them.
    overlap_tokens: int = 128
    # Most windows one call of the engine inside decodes together; a long document's further windows
    # go to the next call, after the other documents' first ones (model/windows/engine.py).
    windows_per_batch: int = 32


class Window(NamedTuple):
    """Characters [start, end) of the document; [own_start, own_end) is the part no other window
    covers better (from the middle of the overlap with the previous window to the middle of the
    overlap with the next), so the owned parts tile the document."""

    start: int
    end: int
    own_start: int
    own_end: int


def split_text(text: str, token_ends: Sequence[int], budget: int, overlap: int) -> list[Window]:
    """Windows of at most `budget` tokens (counting a token cut at a window's start), each starting
    `overlap` tokens before the previous one ends, or earlier, after a sentence end within a quarter
    of the overlap; a window ends after a sentence end within that distance of its last token, when
    one lies there. `token_ends[i]` is the character where token i of `text` ends.

    A value no longer than the overlap lies whole in some window: the last window starting at or
    before it ends at least `overlap` tokens after the next window starts, which is after the value
    starts. Cuts fall between characters, never inside one.
    """
    n = len(token_ends)
    budget = max(budget, 2)
    overlap = max(min(overlap, budget // 2), 0)
    # Snapping only ever moves a start earlier (more overlap) or an end earlier (the next start follows it).
    snap = max((budget - overlap) // 4, 0)
    cuts: list[tuple[int, int]] = []
    first, start = 0, 0  # the window's first token (possibly partly in it) and its first character
    while True:
        last = first + budget
        if last >= n:
            cuts.append((start, len(text)))
            break
        end = token_ends[last - 1]
        earliest = token_ends[max(last - snap, first + 1) - 1]
        end = _after_sentence_end(text, earliest, end) or end
        cuts.append((start, end))
        end_token = bisect_left(token_ends, end)  # the token holding the window's last character
        next_first = max(end_token + 1 - overlap, first + 1)
        next_start = token_ends[next_first - 1]
        earliest = token_ends[max(next_first - snap, first + 1) - 1]
        next_start = _after_sentence_end(text, earliest, next_start) or next_start
        first, start = bisect_right(token_ends, next_start), next_start
    return _with_owned_parts(cuts)


def _after_sentence_end(text: str, lo: int, hi: int) -> int | None:
    """The position just after the last sentence or line end in text[lo:hi], if any."""
    for i in range(hi - 1, lo - 1, -1):
        if text[i] in SENTENCE_ENDS:
            return i + 1
    return None


def _with_owned_parts(cuts: Sequence[tuple[int, int]]) -> list[Window]:
    middles = [(nxt[0] + cur[1]) // 2 for cur, nxt in pairwise(cuts)]
    owned_from = [cuts[0][0], *middles]
    owned_to = [*middles, cuts[-1][1]]
    return [Window(s, e, a, b) for (s, e), a, b in zip(cuts, owned_from, owned_to, strict=True)]
