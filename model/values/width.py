"""Full-width to half-width folding, shared by type checks and normalisation so it exists once."""

from __future__ import annotations

import re
import unicodedata


def fold_width(text: str) -> str:
    """Full-width ASCII forms (０-９, Ａ-Ｚ, ＠, the ideographic space) become their ASCII twins.

    NFKC does exactly this for the compatibility forms and leaves CJK ideographs alone.
    """
    return unicodedata.normalize("NFKC", text)


# One space between two Chinese characters, one of them standing alone (许 文 澜, 韦秀 兰, 病　历　首　页):
# letter-spacing or OCR's, not a word's edge. Between two words it may be one (海口讯 海南省商务厅,
# 姓名 张三), and so may a sex after a name (王小宝 男): those stay.
_SPACE_BETWEEN_HAN = re.compile(r"(?<=[\u4e00-\u9fff])[ \u3000](?=[\u4e00-\u9fff])")


def _han(text: str, at: int) -> bool:
    return 0 <= at < len(text) and "\u4e00" <= text[at] <= "\u9fff"


def _beside_one_alone(text: str, at: int) -> bool:
    """For a space between two Chinese characters: one of them stands alone, and it is no sex after a name."""
    right_alone = not _han(text, at + 2)
    return (not _han(text, at - 2) or right_alone) and not (right_alone and text[at + 1] in "男女")


def inner_space(text: str, at: int) -> bool:
    """Whether `text[at]` is a space `han_squeezed` takes out."""
    return _SPACE_BETWEEN_HAN.match(text, at) is not None and _beside_one_alone(text, at)


def han_squeezed(text: str) -> tuple[str, list[int]]:
    """`text` without the spaces between Chinese characters that `inner_space` finds, and for each of
    its characters its position in `text` (an empty list where there were none: the text is its own)."""
    gaps = {m.start() for m in _SPACE_BETWEEN_HAN.finditer(text) if _beside_one_alone(text, m.start())}
    if not gaps:
        return text, []
    at = [i for i in range(len(text)) if i not in gaps]
    return "".join(text[i] for i in at), at
