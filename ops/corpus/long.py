"""Long documents, 3,000-30,000 characters, with ground truth at every position: contracts whose
parties are defined at the top and whose amount sits pages later, bundles of news items, long
medical histories. Values lie at the head, in the middle and at the tail, so at every length some
lie across a window's cut (model/windows/split.py), wherever the model's window puts it.

Single-value labels (schemas/field_sets.py: SINGLE_VALUE_LABELS) get one value per document, and
the parties and the patient are named again at the end (a repeat is a mention, not a new value).

A window's cut moves back to a sentence or line end near it, so values in punctuated text rarely lie
across one. A third of the documents are therefore flattened, as OCR of a scanned page often leaves
them: sentence and line ends become commas and spaces (never inside a value), and their cuts fall
where the window ends, through values as often as not.
"""

from __future__ import annotations

import math
import random
from datetime import date, timedelta

from faker import Faker

from ops.corpus.builder import DocumentBuilder, Noise
from ops.corpus.contract import FILLER as CONTRACT_FILLER
from ops.corpus.contract import years_later
from ops.corpus.parts import DEPARTMENTS, DIAGNOSES, EVENTS, HOSPITAL_KINDS, city, company, day_between
from ops.corpus.reports import MEDICAL_FILLER, NEWS_FILLER
from ops.corpus.surface import amount, chinese_number, date_text

MIN_LONG_CHARS, MAX_LONG_CHARS = 3000, 30000
FLATTENED_SHARE = 1 / 3
FLATTEN = str.maketrans({"。": "，", "；": "，", "！": "，", "？": "，", "\n": " "})


def flattened(noise: Noise) -> Noise:
    """`noise`, then every sentence and line end turned into a comma or a space."""
    return lambda text: noise(text).translate(FLATTEN)


def long_length(rng: random.Random) -> int:
    """Log-uniform between the bounds: as many documents of 3-6k characters as of 15-30k."""
    return round(math.exp(rng.uniform(math.log(MIN_LONG_CHARS + 200), math.log(MAX_LONG_CHARS - 400))))


def clauses(b: DocumentBuilder, until: int, fillers: list[str], rng: random.Random, numbered: str) -> None:
    """Numbered boilerplate (`numbered` formats the number) until the text is about `until` characters."""
    pool = list(fillers)
    while b.length < until:
        rng.shuffle(pool)
        for sentence in pool[: rng.randrange(2, 5)]:
            b.text(sentence)
        b.text("\n", numbered.format(chinese_number(rng.randrange(1, 99))))


def long_contract(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    employer, employee = company(fake, rng), fake.name()
    signed = day_between(rng, date(2018, 1, 1), date(2026, 12, 31))
    years = rng.choice([1, 2, 3, 5])
    b.text("劳动合同\n", f"合同编号：HT-{signed.year}-{rng.randrange(10000):04d}\n")
    b.text("甲方（用人单位）：").value("甲方", employer).text("（以下简称“甲方”）\n")
    b.text("乙方（劳动者）：").value("乙方", employee).text("（以下简称“乙方”）\n")
    b.text("根据《中华人民共和国劳动合同法》，甲乙双方经平等协商，订立本合同，共同遵守下列条款。\n第一条 ")
    clauses(b, target * 3 // 10, CONTRACT_FILLER, rng, "第{}条 ")
    start = signed + timedelta(days=rng.randrange(1, 30))
    end = years_later(start, years) - timedelta(days=1)
    b.text("合同期限：本合同为固定期限劳动合同，期限").value("合同期限", f"{chinese_number(years)}年")
    b.text("，自").mention(date_text(rng, start)).text("起至").mention(date_text(rng, end)).text("止。\n第十条 ")
    clauses(b, target * 6 // 10, CONTRACT_FILLER, rng, "第{}条 ")
    yuan = rng.randrange(6, 60) * 10000 + rng.choice([0, 5000])
    b.text("劳动报酬：合同金额（年度薪酬总额）为").value("合同金额", amount(rng, yuan)).text("，按月发放。\n第二十条 ")
    clauses(b, target - 150, CONTRACT_FILLER, rng, "第{}条 ")
    b.text("本合同于").value("签约日期", date_text(rng, signed)).text("在").value("签约地点", city(fake))
    b.text("签订，一式两份，双方各执一份。\n甲方（盖章）：").mention(employer)
    b.text("\n乙方（签字）：").mention(employee).text("\n")


def news_bundle(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    publisher = company(fake, rng)
    b.value("发布机构", publisher).text("新闻汇编\n")
    published = day_between(rng, date(2019, 1, 1), date(2026, 12, 31))
    b.text("（").value("发布日期", date_text(rng, published)).text("）本期汇编收录集团及合作伙伴近期动态。\n")
    item = 0
    while b.length < target - 200:
        item += 1
        b.text(f"【{chinese_number(item)}】").value("地点", city(fake)).text("讯 ")
        b.mention(publisher).text("今日宣布").value("事件", rng.choice(EVENTS)).text("。")
        clauses(b, b.length + rng.randrange(300, 900), NEWS_FILLER, rng, "")
        b.text("公司负责人").value("人物", fake.name()).text("表示，这是发展历程中的重要一步。")
        if rng.random() < 0.7:
            b.value("组织机构", company(fake, rng)).text("代表").value("人物", fake.name()).text("出席并致辞。")
        b.text("\n")
    b.text("以上内容由").mention(publisher).text("品牌部整理。\n")


def long_history(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    hospital, patient = fake.city_name() + rng.choice(HOSPITAL_KINDS), fake.name()
    visit = day_between(rng, date(2019, 1, 1), date(2026, 12, 31))
    age = rng.randrange(18, 90)
    b.value("医院名称", hospital).text("\n住院病历\n姓名：").value("患者姓名", patient)
    b.text("  性别：").value("性别", rng.choice(["男", "女"])).text("  年龄：").value("年龄", f"{age}岁")
    b.text("\n就诊日期：").value("就诊日期", date_text(rng, visit)).text(f"  科室：{rng.choice(DEPARTMENTS)}\n")
    clauses(b, target // 2, MEDICAL_FILLER, rng, "病程记录{}：")
    b.text("\n诊断：").value("诊断结果", rng.choice(DIAGNOSES)).text("\n")
    clauses(b, target - 120, MEDICAL_FILLER, rng, "病程记录{}：")
    b.text("\n患者：").mention(patient).text("\n主治医师：").value("主治医师", fake.name())
    b.text("  审核医师：").mention(fake.name()).text("\n")


LONG_KINDS = {"contract": long_contract, "news": news_bundle, "medical": long_history}
