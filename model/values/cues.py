"""Values of untyped labels as a text writes them, found by their cues: degrees, ages, sexes, a
diagnosis after the words that announce one, a job title after its key or a verb of hiring, a
contract's term after its key, a contract's parties on their key lines, and a news event led by its verb.

These labels have no field type (a degree is `text`), so the typed detectors (model/values/mentions.py)
and LAC's entities say nothing about them, and a confident `None` for 学历 beside 本科 or for
诊断结果 after 确诊为 passed every check (issue 31: freeform-medical-03 went to fields with its
diagnosis None). Each pattern is narrow: it finds a value of the label, not every mention of the
word (性别 reads 男/女 only after its key or beside an age).

A value may be written with or without its tail (本科 / 本科学历 / 本科及以上), so each finding
offers its nested spellings, longest first; the lexicon backoff lets the model choose.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from model.values.amounts import ENGLISH_NUMBER_WORD
from model.values.forms import KEYS, closed_end, keyed_values
from model.values.lexicon import ENGLISH_LEGAL_FORMS, organisation_ok, person_ok

_NUM = "[0-9０-９]"
_CN_NUM = "[一二三四五六七八九十百两]"
_DEGREE = re.compile(
    r"(?:统招|全日制)?(?:博士研究生|硕士研究生|博士|硕士|研究生|本科|大专|专科|中专|高中|初中)"
    r"(?P<above>及以上|以上)?(?P<unit>学历|学位)?"
    # English: Bachelor's degree, a master's degree or above
    r"|(?<![A-Za-z])(?:[Bb]achelor|[Mm]aster|[Dd]octoral)(?:'s)?(?P<english>\s(?:degree|Degree))(?P<above_en>\s(?:or|and)\s(?:above|higher))?"
)
# A closed vocabulary's words: a value of its label holds one (华南理 and 中 hold none).
_VOCABULARY = {
    "学历": re.compile(rf"{_DEGREE.pattern}|学士|MBA|EMBA|不限|Bachelor|Master|Ph\.?D|Doctor", re.IGNORECASE),
    "性别": re.compile(r"^\s*(?:男|女|男性|女性|male|female|M|F)\s*$", re.IGNORECASE),
}
_VOCABULARY["学历要求"] = _VOCABULARY["学历"]


def in_vocabulary(label: str, value: str) -> bool:
    """Whether a value of a closed-vocabulary label (学历, 学历要求, 性别) holds one of its words;
    True for any other label."""
    return label not in _VOCABULARY or _VOCABULARY[label].search(value) is not None


_AGE = re.compile(
    rf"(?<![0-9０-９])(?P<figure>{_NUM}{{1,3}})\s?(?:周岁|岁)|(?<!{_CN_NUM})(?P<words>{_CN_NUM}{{1,4}})(?:周岁|岁)"
    # English: 7 years, 35 years old, 62-year-old, 45 y/o
    r"|(?<![0-9A-Za-z])(?P<english>[0-9]{1,3})(?:\s?years?(?:\s?old)?|-year-old|\s?y/o)(?![A-Za-z]|\s?of\b)"
)
# A sex after its key (性别：男, 性  别 男), beside an age (男，45岁), or a word of its own in a list
# (许嘉怡，女，1996年生 / 姓名 段宏伟 | 男 |).
_SEP = r"[，,、|│/\s（()）]"
_SEX = re.compile(
    r"性\s*别\s*[:：│|]?\s*(?P<value>[男女])"
    rf"|(?P<beside>[男女])\s?[，,、/\s]\s?(?:{_NUM}{{1,3}}|{_CN_NUM}{{1,4}})(?:周岁|岁)"
    rf"|(?:^|(?<={_SEP}))(?P<word>[男女])(?={_SEP}|$)"
    # English, a word of its own in a list (Oliver 吴, male, 7 years)
    r"|(?<=[,;/|] )(?P<english>[Mm]ale|[Ff]emale)(?=[,;/|.]|$)",
    re.MULTILINE,
)
# A clause OCR broke over a line: the next line's head up to the clause's end, when short.
_BROKEN_TAIL = r"\n[^，,。；;:：\n│|\s]{1,6}(?=[，,。；;])"
# A diagnosis after the words that announce one, up to the clause's end or a table cell's, and on
# over a line break into a clause's short tail (诊断为右踝关节\n扭伤，建议…).
_DIAGNOSIS = re.compile(
    r"(?:(?:确诊为|诊断为|考虑为?)\s*|(?:临床|初步|出院|入院|门诊|主检)?(?:诊断(?:结果)?|印象|结论)(?:\s*[:：│|]\s*|\s+))"
    rf"(?P<value>[^，,。；;:：\n│|\s][^，,。；;:：\n│|]{{1,39}}(?:{_BROKEN_TAIL})?)"
)
# A numbered list's item mark (1. 2、 3）): no part of the item's value.
_ITEM_MARK = re.compile(r"[0-9０-９]{1,2}\s?[.．、)）]\s*")
# Between two items of a list of values under one key: a semicolon, a 、, or the next numbered line.
ITEM_GAP = r"\s*(?:[；;、]|\n\s*[0-9０-９]{1,2}\s?[.．、)）])\s*"
# A list's closing remark that names no finding.
_NO_FINDING = re.compile(r"未见|无明显|无异常|均正常|未发现")
_NEXT_ITEM = re.compile(rf"{ITEM_GAP}(?P<value>[^，,。；;:：\n│|\s][^，,。；;:：\n│|]{{1,39}})")
# A job title after its key (岗位：…, 【职位】…) or after a verb of hiring, up to a head count or the clause's end.
_TITLE_STOP = r"[，,。；;、！!\n│|\t/】]"
_HEADS = "[0-9０-９一二两三四五六七八九十几]+\\s?[名位个]"
# What follows 招聘 and is no job: the notice itself (招聘启事), its terms.
_NOT_TITLES = "启事|信息|简章|公告|要求|人数|条件|岗位|职位"
_HIRING_EN = "[Ww]e(?:'re| are) hiring"
_TITLE = re.compile(
    rf"(?:招聘岗位|招聘职位|开放职位|岗位|职位|职务|Position)\s*[:：】│|\t]\s*(?P<key>[^\s，,。；;、！!│|\t/][^，,。；;、！!\n│|\t/]{{1,29}}?)\s*(?={_TITLE_STOP}|$)"
    rf"|(?:诚聘|急聘|急招|诚招|招聘|招募|急需|找一位|找一名|{_HIRING_EN})(?:一名|一位|若干名?|\sa)?\s?[｜|:：]?\s?"
    rf"(?!{_NOT_TITLES})(?P<verb>[\u4e00-\u9fffA-Za-z][\u4e00-\u9fffA-Za-z ()]{{1,39}}?)"
    rf"(?=\s?(?:{_HEADS}|若干|{_TITLE_STOP}|$))"
    # 缺 is a verb of hiring only before a head count (缺质检员两个).
    rf"|缺(?P<lack>[\u4e00-\u9fff]{{2,8}}?)(?={_HEADS})",
    re.MULTILINE,
)
# A contract's term: a duration after the words that announce one (期限为三年, 聘期一年, 为期六个月).
_TERM_DATE = r"[0-9０-９]{4}\s*年\s*[0-9０-９]{1,2}\s*月\s*[0-9０-９]{1,2}\s*日"
_TERM = re.compile(
    r"(?:合同期限|劳动合同期限|雇佣期限|服务期限|期限|聘期|租期|服务期|有效期|为期|期为|共|Term"
    r"|开发周期|服务周期|顾问期|履约期|实习期|合作期|租赁期|工期|within)\s*(?:为|是|[:：│|])?\s*"
    # The term's start before its length: 自本协议生效起十八个月, 合同签订后九十日内.
    r"(?:自[^，,。；;\n]{1,12}?起|合同签订后|签订后)?"
    rf"(?P<value>{_TERM_DATE}\s*(?:至|到|-|—|~)\s*{_TERM_DATE}"
    r"|(?:[0-9０-９]+|[一二两三四五六七八九十百零壹贰叁肆伍陆柒捌玖拾]+)\s?(?:个月|个工作日|年|周|天|日|years?|months?|days?)"
    # Open-ended, up to an event: 至项目竣工验收合格之日止; in English words: ninety (90) days.
    r"|至[^，,。；;\n]{2,30}?止"
    rf"|(?:(?i:{ENGLISH_NUMBER_WORD})(?:-(?i:{ENGLISH_NUMBER_WORD}))? \([0-9]+\)|[0-9]+) (?:days|months|years))"
)
# A news event: a clause led by a verb of what organisations do in the news (签署…, 举办…, 宣布…),
# up to the clause's end.
_EVENT_VERBS = "(?:签署|签订|举办|举行|召开|发布|宣布|开通|完成|启动|迎来|收到|推出|上线|开业|达成|成立|开工|投产)"
_EVENT = re.compile(rf"(?:宣布|正式)?(?P<value>{_EVENT_VERBS}[^，,。；;！!？?\n：:]{{2,30}}(?:{_BROKEN_TAIL})?)")
# A contract's party on its key line: 甲方：…, 委托方（甲方）：…, │ 用人单位 │ …, Party A: …, up to the
# clause's or cell's end. A parenthesis inside the name stays (Brightway Consulting (Shenzhen) Ltd.,
# ABB（中国）有限公司); one that closes the line is a gloss (（Suzhou … Co., Ltd.）, （学号 …）) and goes.
_PARTY_KEYS = {
    "甲方": r"甲\s*方|Party\s*A|用人单位|用人方|(?<!受)聘\s*方|委托方|出租方|采购人|发包方|买\s*方|Employer|牵头人",
    "乙方": r"乙\s*方|Party\s*B|劳动者|受聘方|受聘人|受托方|承租方|供应商|承包方|卖\s*方|Employee",
}
_PARTY = {
    label: re.compile(
        rf"(?:^|(?<=[\s│|，,；;。]))(?:{keys})\s*(?:[（(][^）)\n]{{0,10}}[）)])?\s*[:：│|]\s*(?P<value>[^\s，,；;。│|:：])",
        re.MULTILINE,
    )
    for label, keys in _PARTY_KEYS.items()
}
_CLAUSE_END = frozenset("，,；;。\n│|")
_CLOSERS = {"（": "）", "(": ")"}
# An English company's legal form after a comma belongs to its name (Robotics Co., Ltd.).
_LEGAL_FORM_AFTER_COMMA = re.compile(r"\s?(?:Ltd|Inc|LLC|Limited|L\.L\.C)\b")


def _party_end(text: str, start: int) -> int:
    """Where the party named from `start` ends: the clause's end, or a gloss in brackets before it."""
    i = start
    while i < len(text) and text[i] not in _CLAUSE_END:
        closer = _CLOSERS.get(text[i])
        if closer is not None:
            shut = text.find(closer, i)
            if shut < 0:
                return i
            if text[shut + 1 : shut + 2] in ("", *_CLAUSE_END):
                return i
            i = shut
        i += 1
        if text[i : i + 1] in (",", "，") and _LEGAL_FORM_AFTER_COMMA.match(text, i + 1):
            i += 1
    return i


def _party_name(value: str) -> bool:
    """A person's or an organisation's name, spaced as OCR leaves it (陈 德 胜) or an English company's."""
    joined = "".join(value.split())
    return person_ok(value) or person_ok(joined) or organisation_ok(joined) or value.endswith(ENGLISH_LEGAL_FORMS)


# Labels (as the field sets name them) whose values these patterns find, and with a form's keys too.
PATTERN_LABELS = frozenset(
    {"学历", "学历要求", "年龄", "性别", "诊断结果", "职位名称", "合同期限", "事件", *_PARTY_KEYS}
)
CUED_LABELS = PATTERN_LABELS | frozenset(KEYS)


class Cued(NamedTuple):
    text: str
    start: int
    end: int


@functools.lru_cache(maxsize=256)
def cued_values(text: str, label: str) -> tuple[Cued, ...]:
    """The label's values the text writes, in order of appearance (nested spellings longest first);
    empty for a label with no cue."""
    found: list[Cued] = []
    if label in ("学历", "学历要求"):
        for m in _DEGREE.finditer(text):
            # 本科及以上学历, 本科及以上, 本科: each a spelling some writer's value has.
            if m.group("english"):
                above = m.start("above_en") if m.group("above_en") else m.end()
                found += [Cued(text[m.start() : end], m.start(), end) for end in dict.fromkeys((m.end(), above))]
                continue
            unit_less = m.start("unit") if m.group("unit") else m.end()
            bare = m.start("above") if m.group("above") else unit_less
            found += [Cued(text[m.start() : end], m.start(), end) for end in dict.fromkeys((m.end(), unit_less, bare))]
    elif label == "年龄":
        for m in _AGE.finditer(text):
            number = next(g for g in ("figure", "words", "english") if m.group(g))
            found += [Cued(m.group(), m.start(), m.end()), Cued(m.group(number), m.start(number), m.end(number))]
    elif label == "性别":
        for m in _SEX.finditer(text):
            group = next(g for g in ("value", "beside", "word", "english") if m.group(g))
            found.append(Cued(m.group(group), m.start(group), m.end(group)))
    elif label == "诊断结果":
        for m in _DIAGNOSIS.finditer(text):
            start, value = m.start("value"), m.group("value").rstrip()
            if mark := _ITEM_MARK.match(value):
                start, value = start + mark.end(), value[mark.end() :]
            value = text[start : closed_end(text, start, start + len(value))]
            found.append(Cued(value, start, start + len(value)))
            # A list of diagnoses after the one key: 2型糖尿病；糖尿病肾病Ⅲ期, or numbered lines.
            while item := _NEXT_ITEM.match(text, found[-1].end):
                value = item.group("value").rstrip()
                if _NO_FINDING.search(value):
                    break  # 其余项目未见明显异常 closes the list: no diagnosis
                found.append(Cued(value, item.start("value"), item.start("value") + len(value)))
    elif label == "职位名称":
        for m in _TITLE.finditer(text):
            group = next(g for g in ("key", "verb", "lack") if m.group(g))
            found.append(Cued(m.group(group), m.start(group), m.end(group)))
    elif label == "合同期限":
        for m in _TERM.finditer(text):
            found.append(Cued(m.group("value"), m.start("value"), m.end("value")))
    elif label == "事件":
        for m in _EVENT.finditer(text):
            # 宣布发布新一代…: the announcement and what it announces, each a writer's value.
            found += [Cued(m.group(), m.start(), m.end()), Cued(m.group("value"), m.start("value"), m.end("value"))]
    found += [Cued(c.text, c.start, c.end) for c in keyed(text, label)]
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=256)
def keyed(text: str, label: str) -> tuple[Cued, ...]:
    """The label's values the text gives by their keys: a contract's party on its key line
    (委托方（甲方）：…), a form's field (来源：新华网, model/values/forms.py)."""
    found = [Cued(text[start:end], start, end) for start, end in keyed_values(text, label)]
    if label in _PARTY:
        for m in _PARTY[label].finditer(text):
            start = m.start("value")
            value = text[start : _party_end(text, start)].rstrip()
            if _party_name(value):
                found.append(Cued(value, start, start + len(value)))
    return tuple(dict.fromkeys(found))
