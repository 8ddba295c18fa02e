"""The vocabulary as arrays: each token's bytes, length and spelling class, and a hash index that finds
every token occurring anywhere in a document.

Preparing a document's constraint must cost well under a millisecond, so the (position, token) matches
of a source are not found by walking a trie in Python: from every position the source's bytes are
hashed one more at a time (a polynomial rolling hash mod 2**64) and looked up among the hashes of the
tokens' prefixes, and a position stops as soon as its bytes are no token's prefix. That walk is a
compiled loop (numba, `_walk`; `matches` as a whole 1.5-1.7x faster than with the vectorised numpy
passes it replaced, one per length, and the same matches); the few tokens longer than SHORT bytes are
then checked whole, vectorised.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np

from model.grammar.token_bytes import VALUE_BREAKS, TokenBytes

# An odd 64-bit multiplier; bytes enter as b + 1 so that a leading zero byte still changes the hash.
HASH_BASE = np.uint64(0x9E3779B97F4A7C15)
MIX = np.uint64(0xFF51AFD7ED558CCD)
INVERSE_BASE = np.uint64(pow(int(HASH_BASE), -1, 1 << 64))
_BREAK = np.zeros(256, dtype=bool)
_BREAK[list(VALUE_BREAKS)] = True
TAB_BYTE = 9
# Token bytes matched one at a time; longer tokens are checked whole (LongSpellings).
SHORT = 9


def rolling_hash(data: bytes) -> np.uint64:
    h = np.uint64(0)
    with np.errstate(over="ignore"):
        for b in data:
            h = h * HASH_BASE + np.uint64(b + 1)
    return h


class VocabIndex:
    """Built once per engine from its tokenizer's bytes (model/grammar/token_bytes.py)."""

    def __init__(self, vocab: TokenBytes) -> None:
        self.bytes = vocab
        self.size = len(vocab.by_id)
        # Token id `size` is the sentinel that pads every table; it has no bytes and matches nothing.
        self.lengths = np.array([len(b or b"") for b in vocab.by_id] + [0], dtype=np.int64)
        spellings = self._class_of_spelling = {data: i for i, data in enumerate(vocab.ordered)}
        # Ids sharing their bytes (a byte-fallback twin) share a class: the step is forced all the same.
        self.spelling = np.array(
            [spellings[b] if b else -1 - i for i, b in enumerate(vocab.by_id)] + [-1 - self.size], dtype=np.int64
        )
        self.longest = max((len(b) for b in vocab.ordered), default=0)
        # Sorted tables of token prefixes' hashes, each with the spelling it completes (-1 if none): one
        # of the spellings without a value break (a value's own bytes never hold one, so a break in
        # the source ends every match there by itself), and one of all, for heads that hold a break.
        breakless = [i for i, b in enumerate(vocab.ordered) if not VALUE_BREAKS.intersection(b)]
        every = list(range(len(vocab.ordered)))
        self._breakless = (
            PrefixTable.of(vocab.ordered, breakless, self.longest),
            LongSpellings.of(vocab.ordered, breakless),
        )
        self._every = (PrefixTable.of(vocab.ordered, every, self.longest), LongSpellings.of(vocab.ordered, every))
        # CSR from a spelling (an index into vocab.ordered) to its ids, tokenizer's own spelling first.
        ids = [vocab.ids[b] for b in vocab.ordered]
        self._class_first = np.cumsum([0] + [len(i) for i in ids])
        self._class_ids = np.array([t for group in ids for t in group], dtype=np.int64)
        # The walk compiled (or loaded from numba's cache) now, not in the first document.
        self.matches(np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64))

    def matches(
        self, data: np.ndarray, starts: np.ndarray, head: bytes = b""
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, token id, bytes taken from the source) for every token whose bytes are `head` followed
        by a non-empty run of `data` from a position in `starts` that crosses no value break, in no
        particular order (each caller sorts by the key it looks up by).

        Up to SHORT bytes, positions are extended a byte at a time while they spell some token's
        prefix; the few tokens longer than that are then checked whole against the source."""
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        # The source followed by breaks, so that reading past its end stops a match like a break does.
        padded = np.concatenate([data, np.full(self.longest + 1, TAB_BYTE, dtype=np.uint8)])
        table, long = self._every if VALUE_BREAKS.intersection(head) else self._breakless
        short = SHORT - len(head) if len(head) < SHORT else self.longest
        steps = min(short, self.longest - len(head))
        pos, length, cls, alive, h = _walk(
            padded, starts.astype(np.int64), rolling_hash(head), bool(head), steps, *table.arrays()
        )
        found.append((pos, length, cls))
        if len(alive) and len(head) < SHORT and short < self.longest:
            found.append(long.complete(RunHashes(padded), alive, h, short))
        pos, length, cls = (np.concatenate(parts) for parts in zip(*found, strict=True))
        # Expand each spelling to its ids (twins included).
        counts = self._class_first[cls + 1] - self._class_first[cls]
        offsets = np.repeat(self._class_first[cls] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        return np.repeat(pos, counts), self._class_ids[offsets], np.repeat(length, counts)


@dataclass(frozen=True)
class LongSpellings:
    """Spellings longer than SHORT bytes, grouped by the hash of their first SHORT bytes, with each
    whole spelling's hash and the rest of its bytes: a candidate is checked against the source by
    its whole run's hash, read off the source's prefix sums (RunHashes) in a few operations whatever
    its length, and only those whose hashes agree are compared byte by byte."""

    keys: np.ndarray  # sorted: mixed hash of the first SHORT bytes
    classes: np.ndarray
    full: np.ndarray  # the whole spelling's hash
    rest: np.ndarray  # uint8 [n, longest - SHORT]: the bytes after the first SHORT
    rest_length: np.ndarray

    @classmethod
    def of(cls, spellings: list[bytes], chosen: list[int]) -> LongSpellings:
        chosen = [i for i in chosen if len(spellings[i]) > SHORT]
        with np.errstate(over="ignore"):
            keys = np.array([rolling_hash(spellings[i][:SHORT]) for i in chosen], dtype=np.uint64) * MIX
        order = np.argsort(keys, kind="stable")
        full, _ = _hashes([spellings[i] for i in chosen], max([SHORT] + [len(spellings[i]) for i in chosen]))
        width = max([1] + [len(spellings[i]) - SHORT for i in chosen])
        rest = np.zeros((len(chosen), width), dtype=np.uint8)
        for row, i in enumerate(chosen):
            tail = spellings[i][SHORT:]
            rest[row, : len(tail)] = np.frombuffer(tail, dtype=np.uint8)
        lengths = np.array([len(spellings[i]) - SHORT for i in chosen], dtype=np.int64)
        classes = np.array(chosen, dtype=np.int64)
        return cls(keys[order], classes[order], full[order], rest[order], lengths[order])

    def complete(self, source: RunHashes, alive: np.ndarray, h: np.ndarray, taken: int):
        """(start, source bytes taken, spelling) of the long spellings that the positions `alive`
        (having taken `taken` source bytes, the first SHORT bytes with the head, hashed as `h`) go on
        to spell in full, crossing no value break."""
        with np.errstate(over="ignore"):
            mixed = h * MIX
        lo, hi = np.searchsorted(self.keys, mixed, "left"), np.searchsorted(self.keys, mixed, "right")
        counts = hi - lo
        candidate = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        start = np.repeat(alive, counts)
        rest = self.rest_length[candidate]
        at = start + taken
        with np.errstate(over="ignore"):
            spelt = np.repeat(h, counts) * source.power[rest] + source.hash(at, at + rest)
        ok = (spelt == self.full[candidate]) & source.unbroken(at, at + rest)
        start, candidate = start[ok], candidate[ok]
        # The hashes agree; so must the bytes (a source crafted to collide spells no token).
        columns = np.arange(self.rest.shape[1])
        inside = columns < self.rest_length[candidate][:, None]
        same = (source.data[(start + taken)[:, None] + columns] == self.rest[candidate]) | ~inside
        ok = same.all(axis=1)
        return start[ok], taken + self.rest_length[candidate[ok]], self.classes[candidate[ok]]


class RunHashes:
    """A byte string's prefix sums under the rolling hash, for the hash of any run of it in a few array
    operations: with C[j] the sum of (byte_i + 1) * BASE**-i over i < j (mod 2**64, where BASE, odd,
    has an inverse), the run [a, b) hashes to BASE**(b - 1) * (C[b] - C[a])."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.power, inverse = _powers(len(data) + 1)
        with np.errstate(over="ignore"):
            terms = (data.astype(np.uint64) + np.uint64(1)) * inverse[: len(data)]
        self.sums = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(terms, dtype=np.uint64)])
        self.breaks = np.concatenate([[0], np.cumsum(_BREAK[data])])

    def hash(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The rolling hash of each run [a, b), b > a."""
        with np.errstate(over="ignore"):
            return self.power[b - 1] * (self.sums[b] - self.sums[a])

    def unbroken(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether each run [a, b) holds no value break."""
        return self.breaks[b] == self.breaks[a]


@functools.cache
def _powers_of(size: int) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):
        power, inverse = np.full(size, HASH_BASE, dtype=np.uint64), np.full(size, INVERSE_BASE, dtype=np.uint64)
        power[0] = inverse[0] = 1
        return np.cumprod(power, dtype=np.uint64), np.cumprod(inverse, dtype=np.uint64)


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE**k and BASE**-k for k < n at least (sizes rounded up to a power of two, so few are kept)."""
    return _powers_of(1 << max(n - 1, 1).bit_length())


@dataclass(frozen=True)
class PrefixTable:
    """Hashes of every prefix of some spellings, bucketed by the top bits of the hash times an odd
    constant (the polynomial hash of a short string is a small number; the product spreads it), and
    sorted: a look-up reads one bucket, mostly empty or of one entry, instead of binary-searching the
    whole table."""

    hashes: np.ndarray
    classes: np.ndarray  # per hash, the spelling it completes, -1 if none
    first: np.ndarray  # bucket b holds hashes[first[b]:first[b + 1]]
    shift: np.uint64

    @classmethod
    def of(cls, spellings: list[bytes], chosen: list[int], longest: int) -> PrefixTable:
        full, prefixes = _hashes([spellings[i] for i in chosen], longest)
        with np.errstate(over="ignore"):
            hashes = np.unique(prefixes * MIX)
            classes = np.full(len(hashes), -1, dtype=np.int64)
            classes[np.searchsorted(hashes, full * MIX)] = np.array(chosen, dtype=np.int64)
        # Two to four buckets per hash: most look-ups end at an empty bucket or its first entry. In
        # int32, no more memory than int64 offsets at half as many buckets.
        bits = max(1, len(hashes).bit_length() + 1)
        shift = np.uint64(64 - bits)
        first = np.searchsorted(hashes >> shift, np.arange((1 << bits) + 1, dtype=np.uint64)).astype(np.int32)
        return cls(hashes, classes, first, shift)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.uint64]:
        return self.hashes, self.classes, self.first, self.shift


def _hashes(spellings: list[bytes], longest: int) -> tuple[np.ndarray, np.ndarray]:
    """Every spelling's hash, and the hashes of all their non-empty prefixes, one column at a time."""
    lengths = np.array([len(b) for b in spellings], dtype=np.int64)
    padded = np.zeros((len(spellings), max(longest, 1)), dtype=np.uint8)
    for i, data in enumerate(spellings):
        padded[i, : len(data)] = np.frombuffer(data, dtype=np.uint8)
    h = np.zeros(len(spellings), dtype=np.uint64)
    full = np.zeros(len(spellings), dtype=np.uint64)
    prefixes = []
    with np.errstate(over="ignore"):
        for n in range(longest):
            h = h * HASH_BASE + (padded[:, n].astype(np.uint64) + np.uint64(1))
            inside = lengths > n
            prefixes.append(h[inside])
            full[lengths == n + 1] = h[lengths == n + 1]
    return full, np.concatenate(prefixes) if prefixes else np.zeros(0, dtype=np.uint64)


@numba.njit(cache=True)
def _walk(padded, starts, h0, stop_at_breaks, steps, hashes, classes, first, shift):
    """`VocabIndex.matches`'s byte-by-byte part: from each start, the source's bytes are hashed one
    more at a time while they spell some token's prefix (after the head hashed as `h0`; with a head,
    a value break stops the walk), for at most `steps` bytes. Returns the (start, bytes, spelling)
    of the complete spellings met, and the starts still walking after `steps` bytes with their hashes."""
    capacity = 4 * len(starts) + 16
    pos, length, cls = np.empty(capacity, np.int64), np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    alive, alive_h = np.empty(len(starts), np.int64), np.empty(len(starts), np.uint64)
    count = walking = 0
    one = np.uint64(1)
    for start in starts:
        h = h0
        n = 0
        while n < steps:
            byte = padded[start + n]
            h = h * HASH_BASE + (np.uint64(byte) + one)
            at = _find(h, hashes, first, shift)
            if at < 0 or (stop_at_breaks and _BREAK[byte]):
                break
            n += 1
            if classes[at] >= 0:
                if count == capacity:
                    capacity *= 2
                    pos, length, cls = grown(pos, capacity), grown(length, capacity), grown(cls, capacity)
                pos[count], length[count], cls[count] = start, n, classes[at]
                count += 1
        if n == steps:
            alive[walking], alive_h[walking] = start, h
            walking += 1
    return pos[:count], length[:count], cls[:count], alive[:walking], alive_h[:walking]


@numba.njit(cache=True, inline="always")
def _find(h, hashes, first, shift):
    """`h`'s index among the table's hashes (bucketed by the top bits of h * MIX), or -1."""
    mixed = h * MIX
    bucket = np.int64(mixed >> shift)
    for at in range(first[bucket], first[bucket + 1]):
        if hashes[at] == mixed:
            return at
    return -1


@numba.njit(cache=True)
def grown(values, capacity):
    """`values` in a new array of `capacity` entries (compiled loops' buffers that fill up)."""
    out = np.empty(capacity, values.dtype)
    out[: len(values)] = values
    return out
