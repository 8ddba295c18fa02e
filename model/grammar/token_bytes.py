"""The vocabulary as raw bytes, and where token bytes occur in a document's source.

Constraints judge tokens by bytes, not by characters: a byte-level BPE token may hold half of a
Chinese character, and a span may be tokenised differently in the answer than in the source.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

# Bytes a value never contains: they separate values and lines in the answer format.
VALUE_BREAKS = frozenset(b"\t\n")
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-printable-character table, inverted (byte-level BPE vocabularies use it)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


@dataclass(frozen=True)
class TokenBytes:
    """Per token id its bytes (None for special tokens), and a sorted index for prefix look-ups."""

    by_id: list[bytes | None]
    ids: dict[bytes, tuple[int, ...]]
    ordered: list[bytes]
    byte_level: bool = True

    @classmethod
    def from_tokenizer(cls, tokenizer: PreTrainedTokenizerBase) -> TokenBytes:
        special = set(tokenizer.all_special_ids)
        decoder = _byte_decoder()
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        byte_level = type(getattr(tokenizer.backend_tokenizer, "decoder", None)).__name__ == "ByteLevel"
        by_id: list[bytes | None] = []
        for token_id, piece in enumerate(pieces):
            if token_id in special or piece is None:
                by_id.append(None)
            elif byte_level and all(c in decoder for c in piece):
                by_id.append(bytes(decoder[c] for c in piece))
            else:
                by_id.append(tokenizer.decode([token_id]).encode() or None)
        ids: dict[bytes, tuple[int, ...]] = {}
        # Byte-fallback pieces (<0x3A>) repeat the bytes of ordinary tokens (:), which the tokenizer
        # always prefers: list them last, so ids[data][0] is the spelling a tokenizer gives.
        fallback = [bool(_BYTE_PIECE.fullmatch(piece or "")) for piece in pieces]
        for token_id in sorted(range(len(by_id)), key=lambda i: fallback[i]):
            if data := by_id[token_id]:
                ids[data] = (*ids.get(data, ()), token_id)
        return cls(by_id=by_id, ids=ids, ordered=sorted(ids), byte_level=byte_level)

    @functools.cached_property
    def breaking(self) -> frozenset[int]:
        """The ids whose bytes hold a value break: a value ends at the first of them."""
        return frozenset(i for i, data in enumerate(self.by_id) if data and VALUE_BREAKS.intersection(data))

    def starts_some_token(self, prefix: bytes) -> bool:
        i = bisect.bisect_left(self.ordered, prefix)
        return i < len(self.ordered) and self.ordered[i].startswith(prefix)

    def tokens_at(self, source: bytes, starts: Iterable[int], head: bytes = b"") -> list[tuple[int, int]]:
        """(start, token id) for every token whose bytes are `head` + a non-empty run of `source`
        from `start` that crosses no value break."""
        found = []
        for start in starts:
            end = start
            while end < len(source) and source[end] not in VALUE_BREAKS:
                end += 1
                piece = head + source[start:end]
                if not self.starts_some_token(piece):
                    break
                found.extend((start, token_id) for token_id in self.ids.get(piece, ()))
        return found
