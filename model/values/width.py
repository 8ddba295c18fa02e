"""Full-width to half-width folding, shared by type checks and normalisation so it exists once."""

from __future__ import annotations

import unicodedata


def fold_width(text: str) -> str:
    """Full-width ASCII forms (０-９, Ａ-Ｚ, ＠, the ideographic space) become their ASCII twins.

    NFKC does exactly this for the compatibility forms and leaves CJK ideographs alone.
    """
    return unicodedata.normalize("NFKC", text)
