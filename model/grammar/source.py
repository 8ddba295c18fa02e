"""One document's source as the constraint sees it: its bytes, where a value may start, every
(position, token) match, the tokens that open a value after a given head, and how far a typed value
may run from each start. Built once per document with numpy, then only looked up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from model.grammar.vocab import VocabIndex
from model.values.field_types import complete_value, viable_prefix
from schemas.field_sets import FieldType

# Bytes a value never starts on, besides the value breaks: blanks, and the ideographic space's lead.
_BLANKS = np.zeros(256, dtype=bool)
_BLANKS[[ord(" "), ord("\r"), ord("\t"), ord("\n")]] = True
_IDEOGRAPHIC_SPACE = "\u3000".encode()
# Types whose values are checked while they are decoded (model/values/field_types.py:viable_prefix).
CHECKED_TYPES = frozenset({"phone", "id_card", "email"})
UNLIMITED = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class WordEdges:
    """A document's word edges for its name-like labels (model/answers/checks.py:word_edges): each such
    label's edge class, and per class, by character offset (0 to len(text)), where its values may start
    and where they may end."""

    classes: Mapping[str, str] = field(default_factory=dict)
    tables: Mapping[str, tuple[Sequence[bool], Sequence[bool]]] = field(default_factory=dict)


@dataclass
class Entries:
    """Tokens made of a head and then the start of a value: one row per (start, token), sorted by token."""

    pos: np.ndarray  # where the value starts in the source
    tok: np.ndarray
    taken: np.ndarray  # bytes of the token that come from the source (the head's are not)


@dataclass
class SourceTables:
    data: np.ndarray  # uint8 [P]
    boundary: np.ndarray  # bool [P + 1]: a character starts here (or the text ends)
    starts: np.ndarray  # int64: positions where a value may start
    # Every (position, token) match, sorted by position then token; the tokens at p are
    # match_tok[first[p]:first[p + 1]]; key = position * (vocab + 1) + token, for membership tests.
    match_pos: np.ndarray
    match_tok: np.ndarray
    first: np.ndarray
    key: np.ndarray
    entries: dict[bytes, Entries] = field(default_factory=dict)
    reach: dict[str, np.ndarray] = field(default_factory=dict)
    # Per word-edge class and checked type, [P + 1] bool: where such a value may end (a character
    # boundary, and a word edge or the end of a whole value of the type), and where a value may be and
    # still reach such an end, token by token (a word holding a character the vocabulary cannot spell
    # is no dead end the grammar walks into).
    ends: dict[str, np.ndarray] = field(default_factory=dict)
    alive: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.data)


def byte_offsets(tables: SourceTables) -> np.ndarray:
    """[chars + 1]: where each character starts in the UTF-8 bytes, then the end: the boundaries (the
    bytes come from str.encode, so every byte but a continuation byte starts a character)."""
    return np.flatnonzero(tables.boundary)


def prepare_source(text: str, vocab: VocabIndex, edges: WordEdges | None = None) -> SourceTables:
    """The document's tables; a word-edge class's starts go into its `reach` (a start that is no
    word edge reaches itself: no value opens there) and its ends into `ends`."""
    raw = text.encode()
    data = np.frombuffer(raw, dtype=np.uint8)
    size = len(data)
    boundary = np.ones(size + 1, dtype=bool)
    boundary[:size] = (data & 0xC0) != 0x80
    may_start = boundary[:size] & ~_BLANKS[data]
    at = raw.find(_IDEOGRAPHIC_SPACE)
    while at >= 0:
        may_start[at] = False
        at = raw.find(_IDEOGRAPHIC_SPACE, at + 1)
    # One sort of the membership key orders the matches by position, then token (each pair is unique).
    pos, tok, _ = vocab.matches(data, np.arange(size))
    key = np.sort(pos * (vocab.size + 1) + tok)
    pos, tok = np.divmod(key, vocab.size + 1)
    first = np.searchsorted(pos, np.arange(size + 2))
    tables = SourceTables(
        data=data,
        boundary=boundary,
        starts=np.flatnonzero(may_start),
        match_pos=pos,
        match_tok=tok,
        first=first,
        key=key,
    )
    if edges is not None and edges.tables:
        offsets = byte_offsets(tables)
        for name, (starts, ends) in edges.tables.items():
            may_start = np.zeros(size + 1, dtype=bool)
            may_start[offsets[np.asarray(starts, dtype=bool)]] = True
            positions = np.arange(size + 1, dtype=np.int64)
            tables.reach[name] = np.where(may_start, UNLIMITED, positions)
            may_end = np.zeros(size + 1, dtype=bool)
            may_end[offsets[np.asarray(ends, dtype=bool)]] = True
            tables.ends[name] = may_end & boundary
            tables.alive[name] = _reaching(tables, tables.ends[name], vocab.lengths)
    return tables


def _reaching(tables: SourceTables, ends: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """[P + 1]: the positions from which some run of source tokens (no value break) reaches one of
    `ends`; grown from `ends` backwards a token at a time, as many rounds as the longest such run."""
    alive = ends.copy()
    following = tables.match_pos + lengths[tables.match_tok]
    while True:
        grown = alive.copy()
        grown[tables.match_pos[alive[following]]] = True
        if (grown == alive).all():
            return alive
        alive = grown


def may_end(tables: SourceTables, kind: str | None, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[P + 1] each: where a value of `kind` (a checked type, a word-edge class or None) may end, and
    where it may be (still reaching an end); `lengths`: the vocabulary's token lengths in bytes."""
    if kind in CHECKED_TYPES and kind not in tables.ends:
        tables.ends[kind] = _complete_ends(tables, kind)
        tables.alive[kind] = _reaching(tables, tables.ends[kind], lengths)
    if kind not in tables.ends:
        return tables.boundary, np.ones(tables.size + 1, dtype=bool)
    return tables.ends[kind], tables.alive[kind]


def entries(tables: SourceTables, vocab: VocabIndex, head: bytes) -> Entries:
    """Tokens spelling `head` and then a value's first bytes, at every start (cached per head)."""
    found = tables.entries.get(head)
    if found is None:
        if head:
            pos, tok, taken = vocab.matches(tables.data, tables.starts, head)
        else:
            at_start = np.zeros(tables.size + 1, dtype=bool)
            at_start[tables.starts] = True
            keep = at_start[tables.match_pos]
            pos, tok = tables.match_pos[keep], tables.match_tok[keep]
            taken = vocab.lengths[tok]
        order = np.argsort(tok * (tables.size + 1) + pos)
        found = tables.entries[head] = Entries(pos[order], tok[order], taken[order])
    return found


def reach(tables: SourceTables, kind: str) -> np.ndarray:
    """[P + 1]: per start, the byte where the longest value of the checked type `kind` starting there
    may end (values are checked as prefixes: model/values/field_types.py:viable_prefix); for a
    word-edge class, unlimited from a word edge and nothing elsewhere."""
    found = tables.reach.get(kind)
    if found is None:
        found = tables.reach[kind] = _typed_reach(tables, kind)
    return found


# Longest values of checked types, in characters: a phone's spelling, an ID number, an e-mail address.
LONGEST = {"phone": 32, "id_card": 18, "email": 254}


def _typed_reach(tables: SourceTables, kind: FieldType) -> np.ndarray:
    """The check is prefix-closed (every prefix of a viable value is viable), so the longest viable run
    from each start is found by binary search over its length in characters. A cut character counts
    as the source character it is cut from."""
    text, offsets, char_at = _characters(tables)
    out = np.arange(tables.size + 1, dtype=np.int64)  # a start that cannot open a value reaches itself
    for p in tables.starts:
        i = int(char_at[p])
        if not viable_prefix(kind, text[i]):
            continue
        lo, hi = 1, min(len(text) - i, LONGEST[kind])
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if viable_prefix(kind, text[i : i + mid]):
                lo = mid
            else:
                hi = mid - 1
        out[p] = offsets[i + lo]
    return out


def _complete_ends(tables: SourceTables, kind: FieldType) -> np.ndarray:
    """[P + 1]: where a value of the checked type `kind` may end: where the text from some start, within
    that start's viable run, reads as a whole value (model/values/field_types.py:complete_value). Any
    start's whole value opens the end to every value there (the union keeps the table one row; the
    validation loop's type check still reads each value whole)."""
    text, offsets, char_at = _characters(tables)
    longest = reach(tables, kind)
    ends = np.zeros(tables.size + 1, dtype=bool)
    for p in tables.starts[longest[tables.starts] > tables.starts]:
        i, j = int(char_at[p]), int(char_at[longest[p]])
        for e in range(i + 1, j + 1):
            if not ends[offsets[e]] and complete_value(kind, text[i:e]):
                ends[offsets[e]] = True
    return ends


def _characters(tables: SourceTables) -> tuple[str, np.ndarray, np.ndarray]:
    """The source's text, each character's byte offset (then the end), and per byte offset its
    character's index (-1 inside a character)."""
    offsets = byte_offsets(tables)
    char_at = np.full(tables.size + 1, -1, dtype=np.int64)
    char_at[offsets] = np.arange(len(offsets))
    return tables.data.tobytes().decode(), offsets, char_at
