"""OCR-style noise: look-alike characters swapped, characters dropped or doubled, stray spaces,
punctuation read at the other width. Applied per character at a given rate, only to text that is
not a ground-truth value (see `DocumentBuilder`)."""

from __future__ import annotations

import random

from ops.corpus.builder import Noise

# Pairs an OCR engine confuses, both ways.
LOOK_ALIKES = [
    ("已", "己"), ("未", "末"), ("日", "曰"), ("人", "入"), ("土", "士"), ("天", "夭"), ("千", "干"),
    ("刀", "力"), ("问", "间"), ("o", "0"), ("l", "1"), ("，", ","), ("。", "."), ("：", ":"), ("（", "("),
    ("）", ")"), ("；", ";"),
]  # fmt: skip
_SWAP = {a: b for a, b in LOOK_ALIKES} | {b: a for a, b in LOOK_ALIKES}


def ocr_noise(rng: random.Random, rate: float) -> Noise:
    """A noise function drawing from `rng`; rate 0 returns text unchanged (and draws nothing)."""
    if rate <= 0:
        return lambda text: text

    def apply(text: str) -> str:
        out = []
        for char in text:
            if rng.random() >= rate:
                out.append(char)
                continue
            kind = rng.randrange(4)
            if kind == 0 and char in _SWAP:
                out.append(_SWAP[char])
            elif kind == 1:
                continue  # dropped
            elif kind == 2:
                out.append(char * 2)
            else:
                out.append(char + " ")
        return "".join(out)

    return apply
