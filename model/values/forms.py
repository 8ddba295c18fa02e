"""Values a form gives by its keys: `Key：Value` and `Key Value` on a line, `│Key│Value│` and
`Key|Value` cells, and a header row of keys over a row of values (tab- or bar-separated).

The hand-written layouts are forms more often than prose (来源：新华网, │病人 │付子轩│, a job table's
header 岗位名称\\t招聘人数\\t工作地点 over its row), and where a form's key names a label's value the
model, made to choose among the text's names, had picked another (the newspaper for the doctor's
signature, the sponsor for the source). A keyed value is a cue (model/values/cues.py): a label
answered `None` beside it is flagged, and the backoff offers it alone.
"""

from __future__ import annotations

import functools
import itertools
import re

from model.values.field_types import matches
from model.values.lexicon import organisation_ok
from schemas.field_sets import FieldType

# Per label (as the field sets name them), the keys a form writes before its value.
KEYS: dict[str, tuple[str, ...]] = {
    "发布机构": ("来源", "稿源", "出处", "发布单位", "发布机构", "发布", "Source"),
    "地点": ("城市", "地点", "举办地", "Location", "Venue"),
    "工作地点": ("工作地点", "工作城市", "上班地点", "工作地", "地址", "Location"),
    "签约地点": ("签约地点", "签订地点", "签署地点", "签约地", "签订地"),
    "职位名称": ("职位名称", "岗位名称", "招聘岗位", "职位", "岗位", "Position", "Job Title"),
    "公司名称": ("公司名称", "招聘单位", "单位", "公司", "Company"),
    "学历要求": ("学历要求", "学历", "Education"),
    "患者姓名": ("患者姓名", "病人", "患者", "姓名", "Patient", "Name"),
    "主治医师": (
        *("主治医师", "医师签名", "医师", "医生", "送检医生", "接诊医生"),
        *("Doctor", "Physician", "Attending physician"),
    ),
    "医院名称": ("医院名称", "Hospital"),
    "姓名": ("姓名", "Name"),
    "毕业院校": ("毕业院校", "毕业学校", "院校", "学校", "School"),
    "工作单位": ("工作单位", "现任职", "现单位", "Employer"),
    "事件": ("事件", "赛事", "活动"),
    "性别": ("性别", "Sex", "Gender"),
    "年龄": ("年龄", "Age"),
    "诊断结果": ("诊断结果", "诊断", "Diagnosis"),
}
# Labels of a type (as the field sets give it): a keyed value must read as one.
# (A salary's key is left out: two of the hand-written corpora's three writers read 薪资：面议 as none.)
_TYPED: dict[str, FieldType] = {"患者姓名": "person", "主治医师": "person", "姓名": "person"}
FORM_KEYS = frozenset(key for keys in KEYS.values() for key in keys) | {
    "性别", "年龄", "电话", "手机", "薪资", "薪酬", "日期", "招聘人数", "人数", "联系人", "诊断",
    "出生日期", "出生年月", "出生", "民族", "籍贯", "邮箱", "手机号码", "联系电话", "就诊日期",
}  # fmt: skip
_CELL = re.compile(r"[│|\t]")
_TITLE = re.compile(r"(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+")
_END = r"(?=\s*(?:[│|\t\n，,；;。]|\s{2,}|$))"


def _spaced(key: str) -> str:
    """A key as a pattern; a Chinese key's characters may stand apart, as OCR letter-spaces them (患 者 姓 名)."""
    if key.isascii():
        return re.escape(key)
    return "[ \u3000]?".join(map(re.escape, key))


@functools.cache
def _line_pattern(label: str) -> re.Pattern[str]:
    ordered = sorted(KEYS[label], key=len, reverse=True)
    keys = "|".join(map(re.escape, ordered))
    spaced = "|".join(_spaced(key) for key in ordered)
    return re.compile(
        # A key opening a line or a cell, or, followed by a colon, after a space or a clause's end;
        # letter-spaced (诊 断 ：), before a colon or a cell's bar only (诊 断 证 明 书 is a title).
        rf"(?:(?:^|(?<=[│|\t])|(?<=\s\s))[ \t]*(?:(?:{keys})[ \t]*(?:[:：│|]|[ \t](?=\S))|(?:{spaced})[ \t]*[:：│|])"
        rf"|(?<=[\s】）)，,。；;])(?:{spaced})[ \t]*[:：])[ \t]*"
        rf"(?P<value>[^\s│|:：，,；;。][^│|\t\n:：，,；;。]*?){_END}",
        re.MULTILINE | re.IGNORECASE,
    )


@functools.lru_cache(maxsize=64)
def _table_cells(text: str) -> tuple[tuple[str, int, int], ...]:
    """(key, start, end) of each value cell under a header row of keys (three or more cells, the same
    number in both rows, at least half of them form keys); parsed once per text for every label."""
    found = []
    lines = [(m.start(), m.group()) for m in re.finditer(r"[^\n]+", text)]
    for (_, head), (at, row) in itertools.pairwise(lines):
        keys, cells = _cells(head), _cells(row)
        if len(keys) < 3 or len(keys) != len(cells) or sum(k in FORM_KEYS for _, k in keys) * 2 < len(keys):
            continue
        for (_, key), (offset, value) in zip(keys, cells, strict=True):
            if value and value not in FORM_KEYS:
                found.append((key, at + offset, at + offset + len(value)))
    return tuple(found)


def _cells(line: str) -> list[tuple[int, str]]:
    """A row's cells (offset, text), stripped; the row's outer bars are no cells."""
    cells, start = [], 0
    for bar in [*_CELL.finditer(line), None]:
        end = bar.start() if bar else len(line)
        raw = line[start:end]
        value = raw.strip()
        cells.append((start + raw.find(value) if value else start, value))
        start = bar.end() if bar else end
    return [c for i, c in enumerate(cells) if c[1] or 0 < i < len(cells) - 1]


@functools.lru_cache(maxsize=256)
def keyed_values(text: str, label: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of each value the text's form gives `label` by its keys, in order of appearance."""
    if label not in KEYS:
        return ()
    spans = [(m.start("value"), m.end("value")) for m in _line_pattern(label).finditer(text)]
    spans += [(start, end) for key, start, end in _table_cells(text) if key in KEYS[label]]
    keep = []
    for start, end in sorted(set(spans)):
        end = _whole(text, start, end)
        if label in _TYPED and (title := _TITLE.match(text, start, end)):
            start = title.end()  # Dr. Wang Yue: the name is Wang Yue
        value = text[start:end]
        typed = label not in _TYPED or any(matches(_TYPED[label], v) for v in (value, "".join(value.split())))
        if value in FORM_KEYS or not typed:
            continue
        keep.append((start, end))
    return tuple(dict.fromkeys(keep))


_GLOSS = re.compile(r"\s*[（(][^（()）]*[）)]$")
_LEGAL_FORM = re.compile(r",\s?(?:Ltd|Inc|LLC|Limited)\.?")
_NEXT_LINE_HEAD = re.compile(r"\n([^\s│|\t:：，,；;。]{1,6})")


def _whole(text: str, start: int, end: int) -> int:
    """Where the value from `start` ends: past an English legal form after a comma (Co., Ltd.) and
    the head of the next line where OCR broke a name there (股份有\n限公司), less a closing gloss
    (本科及以上（材料、机械相关专业）), and past parentheses OCR broke open."""
    if form := _LEGAL_FORM.match(text, end):
        end = form.end()
    if (head := _NEXT_LINE_HEAD.match(text, end)) and not organisation_ok(text[start:end]):
        joins = [n for n in range(1, len(head[1]) + 1) if organisation_ok(text[start:end] + head[1][:n])]
        end = end + 1 + joins[0] if joins else end
    if gloss := _GLOSS.search(text[start:end]):
        end = start + gloss.start() if gloss.start() > 0 else end
    return closed_end(text, start, end)


_CLOSING = re.compile(r"\n[^\n]{0,12}?[）)]")


def closed_end(text: str, start: int, end: int) -> int:
    """Where a value ends that OCR broke inside its parentheses (甲状腺结节（TI-RADS 3\n类）): past the
    closing one on the next line."""
    value = text[start:end]
    unclosed = value.count("（") + value.count("(") > value.count("）") + value.count(")")
    return closing.end() if unclosed and (closing := _CLOSING.match(text, end)) else end
