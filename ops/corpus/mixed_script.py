"""Mixed-script and scan-shaped values for the open-vocabulary stream (open_layouts.py).

Hand-written documents mix scripts where the generators wrote only hanzi: Latin-script and mixed
people (Zhang Wei, David 李, 王Tony), English or pinyin company names with Ltd./Co., Ltd./GmbH or
a hanzi name with a Latin brand inside, addresses with numbers, floors and rooms, dates in English
and hanzi-numeral forms, amounts in several currencies, phone numbers with +86, and scanned text:
spaces inside a value, full-width digits, line breaks inside labels and between label and value
(never inside a value: the answer is one line per label). Each value is written as it appears, so
it stays a span of the text; values are built from parts (pinyin syllables, made-up brands), never
copied from the hand-written corpora. Also an e-mail layout (From/To/Subject, Dear ..., Best, ...).
"""

from __future__ import annotations

import random
import re
from datetime import date

from ops.corpus import open_vocab as ov
from ops.corpus.builder import DocumentBuilder
from ops.corpus.english_forms import MAKERS, pinyin_word
from ops.corpus.surface import CN_DIGITS, chinese_number, full_width, upper_amount

# Share of open-vocabulary documents whose values are reshaped here.
SHARE = 0.4
SURNAME_PINYIN = (
    "Zhang", "Wang", "Li", "Liu", "Chen", "Yang", "Huang", "Zhao", "Wu", "Zhou", "Xu", "Sun", "Ma", "Zhu", "Hu",
    "Guo", "He", "Lin", "Luo", "Gao", "Zheng", "Liang", "Xie", "Song", "Tang", "Han", "Feng", "Deng", "Cao", "Peng",
    "Zeng", "Xiao", "Tian", "Dong", "Pan", "Yuan", "Cai", "Jiang", "Yu", "Du", "Ye", "Cheng", "Wei", "Su", "Lu",
    "Ding", "Shen",
)  # fmt: skip
ENGLISH_GIVEN = (
    "David", "Peter", "Eric", "Oscar", "Frank", "Lucy", "Steven", "Amy", "Cindy", "Daniel", "Emma", "Sophia", "Ivy",
    "Ryan", "Chloe", "Ken", "Nancy", "Alex", "Ben", "Sam", "Tina", "Mark", "Joyce", "Bruce", "Carol", "Derek",
    "Elaine", "Felix", "Gavin", "Irene", "Ian", "Janet", "Karen", "Louis", "Monica", "Nathan",
)  # fmt: skip
BRAND_PARTS = (
    "Bright", "Nexa", "Blue", "Star", "Sun", "Peak", "Green", "Silver", "Ever", "Smart", "Great", "Wise", "Sino",
    "Asia", "Pacific", "Orient", "Amber", "Apex", "Zen", "Clear", "Swift", "Prime", "Fortis", "Harbor", "Cloud",
    "River", "Stone", "Oak", "Maple", "Vista", "Matrix", "Quantum", "Core",
)  # fmt: skip
BRAND_TAILS = ("ridge", "tech", "link", "stone", "field", "gate", "bridge", "point", "line", "", "", "")
TRADES_EN = (
    "Consulting", "Technology", "Intelligent Technology", "Trading", "Logistics", "Supply Chain Management",
    "Electronics", "Biotech", "Medical Devices", "Software", "Media", "Investment", "Engineering", "Foods",
)  # fmt: skip
FORMS_EN = ("Co., Ltd.", "Co., Ltd.", "Ltd.", "Limited", "Inc.", "Corp.", "GmbH", "LLC", "Pte. Ltd.", "Co.")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
ROADS = ("路", "大道", "街", "北路", "南路", "东路", "中路")
MISREAD = {"0": "O", "1": "l", "5": "S", "8": "B"}
HAN = re.compile(r"[\u4e00-\u9fff]")
PERSON_LABELS = {"乙方", "姓名", "人物", "患者姓名", "主治医师"}
ORG_LABELS = {"甲方", "公司名称", "工作单位", "发布机构", "组织机构"}
PLACE_LABELS = {"签约地点", "工作地点", "地点"}
DATE_LABELS = {"签约日期", "出生日期", "发布日期", "就诊日期"}
PHONE_LABELS = {"手机号码", "联系电话"}


def person(rng: random.Random) -> str:
    """Zhang Wei, Wei Zhang, David 李, 王Tony, Eric Liu, 李 David, ZHANG Wei."""
    surname, hanzi_surname = rng.choice(SURNAME_PINYIN), rng.choice(ov.surnames()[0])
    given_pinyin, english = pinyin_word(rng, rng.choice([1, 2, 2])), rng.choice(ENGLISH_GIVEN)
    return rng.choice([
        f"{surname} {given_pinyin}", f"{given_pinyin} {surname}", f"{english} {hanzi_surname}",
        f"{hanzi_surname}{english}", f"{english} {surname}", f"{hanzi_surname} {english}",
        f"{surname.upper()} {given_pinyin}", f"{english} {hanzi_surname}{ov.given(rng, 1)}",
    ])  # fmt: skip


def organisation(rng: random.Random) -> str:
    """English, pinyin or mixed company names with their legal forms."""
    brand = rng.choice(BRAND_PARTS) + rng.choice(BRAND_TAILS)
    city = pinyin_word(rng, 2)
    hanzi_place = ov.place(rng).removesuffix("市").removesuffix("县")
    return rng.choice([
        f"{brand} {rng.choice(TRADES_EN)} {rng.choice(FORMS_EN)}",
        f"{brand} {rng.choice(TRADES_EN)} ({city}) {rng.choice(FORMS_EN)}",
        f"{city} {pinyin_word(rng, 2)} {rng.choice(TRADES_EN)} Co., Ltd.",
        f"{hanzi_place} {brand} {rng.choice(ov.TRADES)}{rng.choice(ov.LEGAL_FORMS)}",
        f"{hanzi_place}{brand}{rng.choice(ov.TRADES)}有限公司",
        f"{brand.upper()}（{hanzi_place}）{rng.choice(ov.TRADES)}有限公司",
    ])  # fmt: skip


def address(rng: random.Random) -> str:
    """A street address with a number, building, floor and room, sometimes in English order."""
    road = ov.given(rng, 2) + rng.choice(ROADS)
    number, floor, room = rng.randrange(1, 999), rng.randrange(1, 40), rng.randrange(1, 30)
    building = rng.choice(["", f"{rng.randrange(1, 9)}号楼", f"{rng.choice('ABCD')}座", "大厦"])
    return rng.choice([
        f"{ov.place(rng)}{road}{number}号{building}{floor}层",
        f"{ov.place(rng)}{road}{number}号{building}{floor}{room:02d}室",
        f"{road}{number}号{rng.choice('ABCD')}座{floor}F",
        f"Room {floor}{room:02d}, No. {number} {pinyin_word(rng, 2)} Road, {pinyin_word(rng, 2)}",
        f"{floor}/F, {pinyin_word(rng, 2)} Tower, {number} {pinyin_word(rng, 1)} Road",
    ])  # fmt: skip


def date_form(rng: random.Random, day: date) -> str:
    y, m, d = day.year, day.month, day.day
    return rng.choice([
        f"{y}/{m}/{d}", f"{d} {MONTHS[m - 1]} {y}", f"{MONTHS[m - 1]} {d}, {y}", f"{d:02d}/{m:02d}/{y}",
        "".join(CN_DIGITS[int(c)] for c in str(y)) + f"年{chinese_number(m)}月{chinese_number(d)}日",
        f"{y}年 {m}月 {d}日", f"{y}.{m}.{d}", full_width(f"{y}/{m}/{d}"),
    ])  # fmt: skip


def money(rng: random.Random, yuan: int) -> str:
    return rng.choice([
        f"RMB {yuan:,}", f"RMB{yuan:,}.00", f"USD {yuan // 7:,}", f"￥{full_width(f'{yuan:,}').replace(',', '，')}元",
        f"{yuan / 10000:g}万元", f"美元{upper_amount(yuan // 7)}", f"人民币 {yuan:,} 元", f"CNY {yuan:,.2f}",
    ])  # fmt: skip


def telephone(rng: random.Random, number: str) -> str:
    return rng.choice([f"+86 {number[:3]} {number[3:7]} {number[7:]}", f"+86-{number}", f"(+86){number}"])


def scanned(rng: random.Random, value: str) -> str:
    """OCR's damage that keeps the value a span: a space inside it or between every character of a short
    one, full-width digits, a digit misread as a letter (only beside hanzi: a phone or e-mail with one
    would fail its type's check while decoding). Never a line break or tab: those end a value in the
    answer (model/answers/parse.py), so a broken value cannot be answered whole; breaks go around values."""
    style = rng.randrange(4)
    digits = [i for i, c in enumerate(value) if c in MISREAD]
    if style == 3 and digits and HAN.search(value):
        at = rng.choice(digits)
        return value[:at] + MISREAD[value[at]] + value[at + 1 :]
    if style == 0 and len(value) > 3:
        cut = rng.randrange(1, len(value) - 1)
        return value if " " in value[cut - 1 : cut + 1] else value[:cut] + " " + value[cut:]
    if style == 1 and len(value) <= 4 and " " not in value:
        return " ".join(value)
    if value.isascii() and any(c.isdigit() for c in value):
        return full_width(value)
    return value


def broken(rng: random.Random, text: str) -> str:
    """Text around values as a scan breaks it: a line break or a space inside a label or a sentence."""
    if len(text) < 3 or rng.random() < 0.7:
        return text
    cut = rng.randrange(1, len(text) - 1)
    return text[:cut] + rng.choice(["\n", " "]) + text[cut:]


def reshape(values: dict[str, list[str]], rng: random.Random) -> dict[str, list[str]]:
    """`values` with some replaced by mixed-script or English ones (english_forms.py) and some scanned
    (distractors included)."""
    out = {}
    for label, vs in values.items():
        bare = label.removeprefix("~")
        new = []
        for value in vs:
            if bare in MAKERS and rng.random() < 0.5:
                value = MAKERS[bare](rng)
            elif rng.random() < 0.5:
                if bare in PERSON_LABELS or (label.startswith("~") and not label.endswith(("雇主", "客户"))):
                    value = person(rng)
                elif bare in ORG_LABELS or label in ("~前雇主", "~客户"):
                    value = organisation(rng)
                elif bare in PLACE_LABELS:
                    value = address(rng)
                elif bare in DATE_LABELS:
                    year = rng.randrange(1960, 2007) if bare == "出生日期" else rng.randrange(2010, 2030)
                    value = date_form(rng, date(year, rng.randrange(1, 13), rng.randrange(1, 29)))
                elif bare == "合同金额":
                    value = money(rng, rng.randrange(2, 120) * 10000 + rng.randrange(0, 10) * 1000)
                elif bare in PHONE_LABELS and value.isdigit() and len(value) == 11:
                    value = telephone(rng, value)
            new.append(scanned(rng, value) if rng.random() < 0.15 else value)
        out[label] = new
    return out


def bilingual(rng: random.Random, names: tuple[str, ...]) -> str:
    """A label's name, sometimes in Chinese and English together (姓名/Name, Tel（电话）)."""
    chinese, english = [n for n in names if not n.isascii()], [n for n in names if n.isascii()]
    if not chinese or not english or rng.random() < 0.6:
        return rng.choice(names)
    cn, en = rng.choice(chinese), rng.choice(english)
    return rng.choice([f"{cn} {en}", f"{cn}/{en}", f"{en}（{cn}）", f"{cn}({en})"])


def email_document(b: DocumentBuilder, values: dict[str, list[str]], kept: list[str], names, rng) -> None:
    """An e-mail: headers, a greeting, the values as lines with English or Chinese labels, a signature."""
    sender, reader = values["~联系人"][0], values["~上级"][0]
    b.text(f"From: {ov.email(rng)}\nTo: {ov.email(rng)}\n")
    subject = rng.choice(["资料确认", "信息核对", "Info", "Details"])
    b.text("Subject: ", rng.choice(["Re: ", "Fw: ", ""]), subject, "\n\n", rng.choice(["Dear ", "Hi ", ""]))
    b.mention(reader).text(rng.choice([",\n", "，\n", "：\n"]))
    b.text(rng.choice(["请查收以下信息：", "Please find below:", "详情如下"]), "\n")
    separator = rng.choice([": ", "：", ":\t", " - ", "：\n"])
    for label in kept:
        b.text(broken(rng, bilingual(rng, names[label])), separator)
        joiner = rng.choice(["、", ", ", " / "])
        for index, value in enumerate(values[label]):
            b.text(joiner if index else "").value(label, value)
        b.text("\n")
    b.text("\n", rng.choice(["Best,", "Thanks,", "此致", "Regards,"]), "\n").mention(sender)
    b.text(rng.choice(["", " | 人事部", " | HR", "\n" + ov.email(rng)]))
