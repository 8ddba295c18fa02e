"""The rule system SeqStream replaces, as an `Engine`, so `seqstream-ops eval` scores it the same way.

Regexes for the typed values (phones, ID numbers, dates, amounts, e-mails), the shipped lexicons
(model/data) for people's and organisations' names, and keyword cues (甲方, 乙方, 姓名, 公司 ...):
a value is the text after a cue and a colon, checked against its type; with no cue in the text, the
first value of the right type anywhere. That is how such systems are usually built, and why they
break: a cue worded differently, a distractor of the same type before the real value.

Every value is a span of the text, so the baseline never invents one; it has no notion of doubt
either, so it never asks for review.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from model.answers.validate import Extraction
from model.clock import ms_since
from model.config import EngineSettings, decode_settings
from model.engine import BatchResult
from model.values.lexicon import organisation_ok, person_ok
from schemas.messages import Document, ModelInfo, Span, TextWindow, Timings

D = "[0-9０-９]"
CN = "[〇零一二三四五六七八九十]"
UPPER = "[零壹贰叁肆伍陆柒捌玖拾佰仟万亿]"
# Value shapes, written against the raw text: full-width digits and the usual separators included.
SHAPES: dict[str, str] = {
    "phone": rf"(?:\+86[- ]?)?[1１][3-9３-９]{D}(?:[- ]?{D}){{8}}",
    "id_card": rf"{D}{{17}}[0-9０-９Xx]",
    "date": (
        rf"{D}{{4}}(?:年{D}{{1,2}}月{D}{{1,2}}日|[-/.]{D}{{1,2}}[-/.]{D}{{1,2}})"
        rf"|{CN}{{4}}年{CN}{{1,3}}月{CN}{{1,3}}日"
    ),
    "amount": rf"人民币{UPPER}+元整?|(?:人民币)?{D}+(?:\.{D}+)?万?元|¥[0-9,]+(?:\.[0-9]{{2}})?",
    "email": r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+",
    # 2-4 characters, then something that is not part of a name (punctuation, 在, 出席, 先生 ...).
    "person": r"[\u4e00-\u9fff·]{2,4}?(?=[^\u4e00-\u9fff·]|$|在|出席|表示|先生|女士)",
    "city": r"[\u4e00-\u9fff]{2,6}?市",
    # Free text: up to the next delimiter.
    "text": r"[^\n\t，,。；;（(：:]+?(?=$|[\n\t，,。；;（(]|  )",
}
# An organisation: a run of CJK (and Latin) ending with a shipped suffix, checked by the lexicon.
ORG = r"[\u4e00-\u9fffA-Za-z]{2,24}?(?:有限责任公司|股份有限公司|有限公司|公司|集团|医院|大学|学院|研究院)"
SHAPES["organisation"] = ORG
# A cue, an optional parenthesis (甲方（用人单位）), a colon.
CUE_TAIL = r"(?:[（(][^）)\n]{0,12}[）)])?\s*[：:]\s*"


@dataclass(frozen=True)
class Rule:
    shape: str
    # Regexes the value directly follows; a plain word is followed by CUE_TAIL.
    cues: tuple[str, ...] = ()
    # Every match in the text (人物, 组织机构), not the first one.
    every: bool = False
    # Whether the value may be looked for without its cue.
    anywhere: bool = True


def cue(word: str) -> str:
    return re.escape(word) + CUE_TAIL


RULES: dict[str, Rule] = {
    # contract
    "甲方": Rule("organisation", (cue("甲方"),)),
    "乙方": Rule("person", (cue("乙方"),), anywhere=False),
    "签约日期": Rule("date", (cue("签约日期"), cue("签订日期"), r"本合同于")),
    "合同金额": Rule("amount", (cue("合同金额"), r"金额[^为：:\n]{0,12}为")),
    "合同期限": Rule("text", (cue("合同期限"), r"期限"), anywhere=False),
    "签约地点": Rule("city", (cue("签约地点"), r"在"), anywhere=False),
    # résumé
    "姓名": Rule("person", (cue("姓名"),), anywhere=False),
    "性别": Rule("text", (cue("性别"),), anywhere=False),
    "出生日期": Rule("date", (cue("出生日期"), cue("出生年月"))),
    "手机号码": Rule("phone", (cue("手机号码"), cue("手机"), cue("电话"))),
    "电子邮箱": Rule("email", (cue("电子邮箱"), cue("邮箱"), cue("Email"))),
    "毕业院校": Rule("text", (cue("毕业院校"), cue("学校")), anywhere=False),
    "学历": Rule("text", (cue("学历"),), anywhere=False),
    "工作单位": Rule("organisation", (cue("工作单位"), r"至今\s*")),
    # job ad
    "公司名称": Rule("organisation", (cue("公司名称"), r"【招聘】")),
    "职位名称": Rule("text", (cue("职位名称"), cue("职位"), r"诚聘"), anywhere=False),
    "工作地点": Rule("city", (cue("工作地点"),)),
    "薪资范围": Rule("text", (cue("薪资范围"), cue("薪资待遇"), cue("薪资")), anywhere=False),
    "学历要求": Rule("text", (cue("学历要求"), cue("任职要求")), anywhere=False),
    "联系电话": Rule("phone", (cue("联系电话"), cue("电话"))),
    # news
    "发布机构": Rule("organisation", (cue("发布机构"),)),
    "发布日期": Rule("date", (cue("发布日期"),)),
    "人物": Rule("person", (r"董事长", r"总裁", r"总经理", r"负责人"), every=True, anywhere=False),
    "组织机构": Rule("organisation", (), every=True),
    "地点": Rule("city", (cue("地点"),)),
    "事件": Rule("text", (r"宣布",), anywhere=False),
    # medical report
    "患者姓名": Rule("person", (cue("患者姓名"), cue("姓名")), anywhere=False),
    "年龄": Rule("text", (cue("年龄"),), anywhere=False),
    "就诊日期": Rule("date", (cue("就诊日期"),)),
    "诊断结果": Rule("text", (cue("诊断结果"), cue("诊断")), anywhere=False),
    "主治医师": Rule("person", (cue("主治医师"), cue("医师")), anywhere=False),
    "医院名称": Rule("organisation", (cue("医院名称"),)),
}
# A label no rule knows: the text after the label itself and a colon.
DEFAULT_RULE = Rule("text", anywhere=False)
CHECKS = {"person": person_ok, "organisation": organisation_ok}


def find_values(text: str, label: str) -> list[tuple[int, int]]:
    """(start, end) of each value of `label` the rules find in `text`, in text order."""
    rule = RULES.get(label, DEFAULT_RULE)
    shape = SHAPES[rule.shape]
    check = CHECKS.get(rule.shape, lambda _: True)
    found: list[tuple[int, int]] = []
    for cue_pattern in rule.cues or ((cue(label),) if rule is DEFAULT_RULE else ()):
        for match in re.finditer(f"(?:{cue_pattern})(?P<v>{shape})", text):
            value = match.group("v").strip()
            if value and check(value):
                start = match.start("v") + match.group("v").index(value)
                found.append((start, start + len(value)))
        if found and not rule.every:
            return found[:1]
    if rule.anywhere or (rule.every and not rule.cues):
        for match in re.finditer(shape, text):
            if check(match.group()):
                found.append(match.span())
                if not rule.every:
                    break
    return sorted(set(found))


class RuleEngine:
    """Regexes, lexicons and keyword cues behind the engine protocol; a subclass that finds values
    another way (ops/eval/lexicon.py) overrides `name` and `find`."""

    name = "regex-baseline"

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.info = ModelInfo(
            name=self.name,
            engine="rules",
            attention="none",
            dtype="none",
            device="cpu",
            demo=False,
            decode=decode_settings(settings or EngineSettings()),
        )

    def find(self, doc: Document) -> dict[str, list[tuple[int, int]]]:
        """Per label of `doc`, the (start, end) spans the rules find."""
        return {label: find_values(doc.text, label) for label in doc.labels}

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        started = time.perf_counter()
        extractions = []
        for doc in docs:
            extraction = Extraction(doc_id=doc.doc_id, windows=[TextWindow(start=0, end=len(doc.text))])
            for label, spans in self.find(doc).items():
                extraction.fields[label] = [
                    Span(text=doc.text[start:end], start=start, end=end, confidence=1.0, margin=1.0)
                    for start, end in spans
                ]
            extractions.append(extraction)
        return BatchResult(extractions=extractions, timings=Timings(decode_ms=ms_since(started)))
