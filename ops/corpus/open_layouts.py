"""Open-vocabulary documents for training: values from parts (open_vocab.py) in many layouts.

A document is one of: key-value lines (a label's name in Chinese or English, colons full- or
half-width, tabs, pipes), a line of values only separated by slashes, pipes or spaces (an ad), a
table flattened to a header line and a value line, or prose whose sentences are shuffled and put
names of other roles beside the value (the patient beside the doctor, 甲方 beside 乙方, 以下简称),
sometimes the value before its label; or the free-phrasing templates (free.py) with their
name-like values replaced by values from parts; or an e-mail. In a share of documents the values
are reshaped into mixed-script and scan-damaged ones (mixed_script.py). A fifth of the values is
left out, so `None` is learnt too.
"""

from __future__ import annotations

import random
from datetime import date

from faker import Faker

from ops.corpus import mixed_script
from ops.corpus import open_vocab as ov
from ops.corpus.builder import DocumentBuilder
from ops.corpus.free import SLOT, free_document
from ops.corpus.free import values_for as free_values
from ops.corpus.parts import day_between
from ops.corpus.surface import amount, chinese_number, date_text, full_width, phone

MISSING = 0.2
NAMES: dict[str, tuple[str, ...]] = {
    "甲方": ("甲方", "用人单位", "聘用单位", "雇主", "Employer", "Party A"),
    "乙方": ("乙方", "受聘人", "员工", "劳动者", "Employee", "Party B"),
    "签约日期": ("签约日期", "签订日期", "签署日期", "日期", "Date"),
    "合同金额": ("合同金额", "年薪", "薪酬总额", "报酬", "Salary"),
    "合同期限": ("合同期限", "期限", "聘期", "Term"),
    "签约地点": ("签约地点", "签订地点", "签署地", "Place"),
    "姓名": ("姓名", "名字", "Name", "求职者"),
    "性别": ("性别", "Gender", "Sex"),
    "出生日期": ("出生日期", "出生年月", "生日", "Birthday", "DOB"),
    "手机号码": ("手机", "手机号码", "电话", "Tel", "Mobile"),
    "电子邮箱": ("邮箱", "电子邮箱", "E-mail", "Email", "Mail"),
    "毕业院校": ("毕业院校", "学校", "母校", "School"),
    "学历": ("学历", "最高学历", "Degree"),
    "工作单位": ("工作单位", "现单位", "所在单位", "Company"),
    "公司名称": ("公司", "公司名称", "招聘单位", "Company"),
    "职位名称": ("职位", "岗位", "招聘岗位", "Position", "Job"),
    "工作地点": ("工作地点", "地点", "城市", "Location", "Base"),
    "薪资范围": ("薪资", "月薪", "待遇", "Salary"),
    "学历要求": ("学历", "学历要求", "Education"),
    "联系电话": ("电话", "联系电话", "联系方式", "Tel", "Phone"),
    "发布机构": ("来源", "发布", "发布单位", "Source"),
    "发布日期": ("日期", "时间", "发布日期", "Date"),
    "人物": ("人物", "出席", "People"),
    "组织机构": ("单位", "参与机构", "Organisations"),
    "地点": ("地点", "地址", "Location"),
    "事件": ("事件", "主题", "Event"),
    "患者姓名": ("姓名", "患者", "病人", "就诊人", "Patient"),
    "年龄": ("年龄", "Age"),
    "就诊日期": ("就诊日期", "日期", "就诊时间", "Date"),
    "诊断结果": ("诊断", "诊断结果", "临床诊断", "Diagnosis"),
    "主治医师": ("医生", "医师", "主治医师", "接诊医生", "Doctor"),
    "医院名称": ("医院", "医院名称", "Hospital"),
}
# Prose with names of other roles beside the value; `{~x}` is a distractor (not a value).
PROSE: dict[str, list[str]] = {
    "contract": [
        "{甲方}（以下简称甲方）与{乙方}（以下简称乙方）签订本合同",
        "{乙方}受聘于{甲方}",
        "经{~介绍人}介绍，{乙方}与{甲方}达成聘用意向",
        "{乙方}（乙方）同意{~前雇主}的离职手续已办妥",
        "{甲方}为甲方，{~担保人}为见证人",
        "聘期{合同期限}，报酬合计{合同金额}",
        "{合同期限}为本合同的期限",
        "{合同金额}为乙方全年报酬",
        "{签约日期}签于{签约地点}",
        "签约于{签约地点}，时间{签约日期}",
        "甲方代表{~代表}与乙方{乙方}当面签字",
    ],
    "resume": [
        "{姓名}，{性别}，{出生日期}生",
        "{姓名}（{性别}）的推荐人是{~推荐人}",
        "{学历}，{毕业院校}毕业",
        "{毕业院校}{学历}在读时师从{~导师}",
        "在{工作单位}任职，上级为{~上级}",
        "离开{~前雇主}后加入{工作单位}",
        "{手机号码}（手机）",
        "{电子邮箱}（邮箱）",
        "紧急联系人{~联系人}",
    ],
    "job_ad": [
        "{公司名称}招{职位名称}",
        "{职位名称}（{工作地点}）",
        "{公司名称}为{~客户}提供服务，现诚聘{职位名称}",
        "{薪资范围}，{学历要求}",
        "{工作地点}，{薪资范围}",
        "{联系电话}（人事{~联系人}）",
        "投递请打{联系电话}",
    ],
    "news": [
        "{发布日期}，{地点}消息，{组织机构}{事件}",
        "{组织机构}负责人{人物}说，{事件}是今年的重点",
        "{人物}与{人物}共同出席",
        "{发布机构}记者{~记者}报道",
        "{发布机构}（{发布日期}）",
        "{事件}在{地点}进行",
        "{组织机构}和{组织机构}共同{事件}",
    ],
    "medical": [
        "患者{患者姓名}由{主治医师}接诊",
        "{主治医师}医生为{患者姓名}做了检查",
        "{患者姓名}，{性别}，{年龄}，家属{~家属}陪同",
        "{就诊日期}于{医院名称}就诊",
        "{诊断结果}（诊断），签名：{主治医师}",
        "{医院名称}{~科室医生}会诊后考虑{诊断结果}",
        "复核医师{~复核}，主治{主治医师}",
    ],
}
SEPARATORS = ("：", ":", ": ", " ", "\t", "｜", "：\n")
LINE_ENDS = ("\n", "\n", "\n", "；", "  ", "\n\n", "，")
INLINE = (" / ", "/", " | ", "|", "｜", "  ", " · ", "，", "\t")
# free.py's slots and the value from parts that replaces each.
FREE_SLOTS = {
    ov.organisation: ("甲方", "~中介", "~前雇主", "公司名称", "~客户", "工作单位", "发布机构", "组织机构"),
    ov.person: ("乙方", "姓名", "人物", "患者姓名", "主治医师", "~审核医师", "~家属"),
    ov.place: ("签约地点", "工作地点", "地点"),
    ov.school: ("毕业院校",),
    ov.hospital: ("医院名称",),
    ov.job_title: ("职位名称",),
    ov.event: ("事件",),
    ov.illness: ("诊断结果",),
    ov.email: ("电子邮箱",),
}
REQUIREMENTS = ("本科", "大专以上", "本科及以上", "不限", "硕士优先", "中专", "高中以上", "研究生")
SPEAKERS = ("HR", "小王", "客服", "李老师", "前台", "张经理", "我", "群主")


def values_for(kind: str, rng: random.Random, fake: Faker) -> dict[str, list[str]]:
    """label -> values (several for 人物, 组织机构 and 地点), plus `~` distractors (other people)."""
    day = day_between(rng, date(2012, 1, 1), date(2028, 12, 31))
    people = {f"~{k}": [ov.person(rng)] for k in ("介绍人", "担保人", "代表", "推荐人", "导师")}
    people |= {f"~{k}": [ov.person(rng)] for k in ("上级", "联系人", "记者", "家属", "科室医生", "复核")}
    people |= {"~前雇主": [ov.organisation(rng)], "~客户": [ov.organisation(rng)]}
    if kind == "contract":
        years = rng.choice([1, 2, 3, 4, 5, 8, 10])
        term = rng.choice([f"{chinese_number(years)}年", f"{years}年", f"{years * 12}个月", f"{years} years"])
        yuan = rng.randrange(2, 120) * 10000 + rng.randrange(0, 10) * 1000
        values = {
            "甲方": [ov.organisation(rng)], "乙方": [ov.person(rng)], "合同期限": [term],
            "合同金额": [amount(rng, yuan)], "签约日期": [date_text(rng, day)], "签约地点": [ov.place(rng)],
        }  # fmt: skip
    elif kind == "resume":
        born = day_between(rng, date(1962, 1, 1), date(2006, 12, 31))
        values = {
            "姓名": [ov.person(rng)], "性别": [rng.choice(["男", "女"])], "出生日期": [date_text(rng, born)],
            "手机号码": [phone(rng, fake.phone_number())], "电子邮箱": [ov.email(rng)], "毕业院校": [ov.school(rng)],
            "学历": [rng.choice(["本科", "硕士", "博士", "大专", "中专", "高中", "硕士研究生", "MBA"])],
            "工作单位": [ov.organisation(rng)],
        }  # fmt: skip
    elif kind == "job_ad":
        low = rng.randrange(3, 40)
        salary = rng.choice(
            [f"{low}-{low + rng.randrange(2, 20)}K", f"{low}k~{low + 8}k", f"{low * 1000}-{low * 1500}元/月",
             f"{low}千-{low + 5}千", f"年薪{low}-{low + 10}万", f"{low}-{low + 6}K·13薪", "面议"]
        )  # fmt: skip
        values = {
            "公司名称": [ov.organisation(rng)], "职位名称": [ov.job_title(rng)], "工作地点": [ov.place(rng)],
            "薪资范围": [salary], "学历要求": [rng.choice(REQUIREMENTS)],
            "联系电话": [phone(rng, fake.phone_number())],
        }  # fmt: skip
    elif kind == "news":
        values = {
            "发布机构": [ov.organisation(rng)], "发布日期": [date_text(rng, day)],
            "人物": [ov.person(rng) for _ in range(rng.randrange(1, 3))],
            "组织机构": [ov.organisation(rng) for _ in range(rng.randrange(1, 3))],
            "地点": [ov.place(rng)], "事件": [ov.event(rng)],
        }  # fmt: skip
    else:
        age = rng.randrange(1, 96)
        values = {
            "患者姓名": [ov.person(rng)], "性别": [rng.choice(["男", "女"])], "就诊日期": [date_text(rng, day)],
            "年龄": [rng.choice([f"{age}岁", full_width(f"{age}") + "岁", f"{chinese_number(age)}岁", f"{age}"])],
            "诊断结果": [ov.illness(rng)], "主治医师": [ov.person(rng)], "医院名称": [ov.hospital(rng)],
        }  # fmt: skip
    return values | people


def open_document(kind: str, fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    """An open-vocabulary document of `kind` into `b`, in one of the layouts (`target` unused: these
    are as long as their layout makes them, 40-400 characters)."""
    values = values_for(kind, rng, fake)
    if rng.random() < mixed_script.SHARE:  # Latin-script and mixed names, OCR breaks (mixed_script.py)
        values = mixed_script.reshape(values, rng)
    labels = [label for label in values if not label.startswith("~")]
    kept = [label for label in labels if rng.random() >= MISSING] or [rng.choice(labels)]
    rng.shuffle(kept)
    layout = rng.choice(["lines", "lines", "inline", "table", "prose", "prose", "chat", "free", "free", "email"])
    if layout == "email":
        mixed_script.email_document(b, values, kept, NAMES, rng)
    elif layout == "free":
        drawn = free_values(kind, fake, rng)
        for make, slots in FREE_SLOTS.items():
            drawn |= {slot: make(rng) for slot in slots if slot in drawn}
        free_document(kind, fake, rng, b, rng.choice([0, 1]), drawn)
    elif layout == "lines":
        separator, end = rng.choice(SEPARATORS), rng.choice(LINE_ENDS)
        for label in kept:
            b.text(rng.choice(NAMES[label]), separator)
            _values(b, label, values[label], rng)
            b.text(end)
            if rng.random() < 0.15:
                b.text(rng.choice(["经办人", "审核", "备注联系人", "Contact"]), separator).mention(values["~联系人"][0])
                b.text(end)
    elif layout == "inline":
        separator = rng.choice(INLINE)
        for index, label in enumerate(kept):
            b.text(separator if index else "")
            if rng.random() < 0.3:
                b.text(rng.choice(NAMES[label]), rng.choice(["：", ":", " "]))
            _values(b, label, values[label], rng)
    elif layout == "table":
        separator = rng.choice(["|", "\t", " | ", "  ", "，"])
        b.text(separator.join(rng.choice(NAMES[label]) for label in kept), "\n")
        for index, label in enumerate(kept):
            b.text(separator if index else "")
            _values(b, label, values[label], rng)
    else:
        _prose(kind, b, values, set(kept), rng, chat=layout == "chat")


def _values(b: DocumentBuilder, label: str, values: list[str], rng: random.Random) -> None:
    joiner = rng.choice(["、", "，", " ", "/"])
    for index, value in enumerate(values):
        b.text(joiner if index else "")
        b.value(label, value)


def _prose(kind: str, b: DocumentBuilder, values: dict[str, list[str]], kept: set[str], rng, *, chat: bool) -> None:
    templates = list(PROSE[kind])
    rng.shuffle(templates)
    covered: set[str] = set()
    for template in templates:
        slots = SLOT.findall(template)
        if any(not s.startswith("~") and s not in kept for s in slots):
            continue
        if not set(slots) - covered and rng.random() > 0.2:
            continue
        covered |= set(slots)
        # A label written twice in one template (人物 and 人物) takes its next value.
        taken: dict[str, int] = {}
        filled = {}
        for slot in slots:
            pool = values[slot]
            filled.setdefault(slot, [])
            filled[slot].append(pool[min(taken.get(slot, 0), len(pool) - 1)])
            taken[slot] = taken.get(slot, 0) + 1
        if chat:
            b.text(rng.choice(SPEAKERS), rng.choice([" ", "："]), f"{rng.randrange(8, 23)}:{rng.randrange(60):02d}\n")
        _write_repeated(b, template, filled)
        b.text("\n" if chat else rng.choice(["。", "\n", "；", "！", "。\n", " "]))
    for label in sorted(kept - covered):
        # Values no chosen sentence carried: a key-value line each, as notes at the end.
        b.text(rng.choice(NAMES[label]), rng.choice(SEPARATORS))
        _values(b, label, values[label], rng)
        b.text("\n")


def _write_repeated(b: DocumentBuilder, template: str, filled: dict[str, list[str]]) -> None:
    """`template` with each slot's values used in turn (a slot may appear twice)."""
    pieces = SLOT.split(template)
    used: dict[str, int] = {}
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            if piece:
                b.text(piece)
            continue
        value = filled[piece][used.get(piece, 0)]
        used[piece] = used.get(piece, 0) + 1
        if piece.startswith("~"):
            b.mention(value)
        else:
            b.value(piece, value)
