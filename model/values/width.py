"""Full-width to half-width folding, and the spaces and line breaks that letter-spacing and OCR leave
inside Chinese words: shared by type checks, normalisation and LAC's reading so they exist once."""

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


# A line break between two Chinese characters is OCR's wrap when a word runs across it (广西医科大学第一附
# 属医院: 附属; 文化体育广 电和旅游局: 广电), and a line's end otherwise (教育装备中心 地址).
_BREAK_BETWEEN_HAN = re.compile(r"(?<=[\u4e00-\u9fff])\n(?=[\u4e00-\u9fff])")
_HAN_TAIL = re.compile(r"[\u4e00-\u9fff]{1,6}$")
_HAN_HEAD = re.compile(r"[\u4e00-\u9fff]{1,6}")


def _inside_word(text: str, at: int) -> bool:
    """For a line break between two Chinese characters: a dictionary word of jieba's (jieba-rs, which
    cuts a run of Chinese characters as jieba does; no HMM guess, which joined 书 and 兹 of 证明书\n兹证明)
    runs across it once the characters around it are joined."""
    import rjieba

    left = _HAN_TAIL.search(text, 0, at)
    right = _HAN_HEAD.match(text, at + 1)
    if left is None or right is None:
        return False
    edge = 0
    for word in rjieba.cut(left.group() + right.group(), hmm=False):
        edge += len(word)
        if edge >= len(left.group()):
            return edge > len(left.group())
    return False


def inner_space(text: str, at: int) -> bool:
    """Whether `text[at]` is a space or a line break `han_squeezed` takes out."""
    if _BREAK_BETWEEN_HAN.match(text, at):
        return _inside_word(text, at)
    return _SPACE_BETWEEN_HAN.match(text, at) is not None and _beside_one_alone(text, at)


def han_squeezed(text: str) -> tuple[str, list[int]]:
    """`text` without the spaces and line breaks between Chinese characters that `inner_space` finds, and
    for each of its characters its position in `text` (an empty list where there were none: the text is its own)."""
    gaps = {m.start() for m in _SPACE_BETWEEN_HAN.finditer(text) if _beside_one_alone(text, m.start())}
    gaps |= {m.start() for m in _BREAK_BETWEEN_HAN.finditer(text) if _inside_word(text, m.start())}
    if not gaps:
        return text, []
    at = [i for i in range(len(text)) if i not in gaps]
    return "".join(text[i] for i in at), at
