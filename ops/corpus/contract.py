"""劳动合同摘要: an employer (甲方) and an employee (乙方), dates, pay, term, place.

Distractors: the term's start and end dates (not the signing date), a recruiting agency that is
not a party, and the parties' names repeated at the signatures.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from faker import Faker

from ops.corpus.builder import DocumentBuilder
from ops.corpus.parts import POSITIONS, city, company, credit_code, day_between
from ops.corpus.surface import amount, chinese_number, date_text, phone

MISSING = 0.15
FILLER = [
    "甲方应当依法建立和完善劳动规章制度，保障乙方享有劳动权利、履行劳动义务。",
    "乙方患病或非因工负伤，依法享受医疗期待遇。",
    "合同期满前，双方可协商续订劳动合同，续订合同应采用书面形式。",
    "甲方不得强迫或变相强迫乙方加班，确需延长工作时间的，应依法支付加班费。",
    "乙方应遵守甲方依法制定的各项规章制度，服从甲方的工作安排。",
    "甲方为乙方提供符合国家规定的劳动安全卫生条件和必要的劳动防护用品。",
    "甲方按国家和地方有关规定为乙方缴纳养老、医疗、失业、工伤和生育保险。",
    "乙方在合同期内享受国家规定的法定节假日、年休假、婚假、产假等假期。",
    "乙方应当保守甲方的商业秘密，未经书面许可不得向第三方披露。",
    "因履行本合同发生争议，双方应协商解决；协商不成的，可向劳动争议仲裁委员会申请仲裁。",
    "本合同未尽事宜，按国家有关法律、法规执行。",
    "试用期内，甲方对乙方进行岗位培训和考核，考核合格后转为正式员工。",
    "甲方根据生产经营需要，可依法调整乙方的工作岗位和工作地点。",
    "乙方因个人原因解除合同的，应提前三十日以书面形式通知甲方。",
    "甲方每月以货币形式足额支付乙方工资，不得无故拖欠或克扣。",
    "本合同经双方签字盖章后生效，任何一方不得擅自变更或解除。",
    "乙方的工作时间实行标准工时制度，每日工作八小时，每周工作五日。",
    "双方确认，本摘要所载内容与正式合同文本一致，如有冲突以正式文本为准。",
    "乙方承诺入职时提供的个人信息及学历证明真实有效。",
    "甲方应建立健全职业培训制度，根据乙方岗位要求提供相应培训。",
]


def years_later(day: date, years: int) -> date:
    """The same day `years` later; 29 February becomes 28 February in a common year."""
    try:
        return day.replace(year=day.year + years)
    except ValueError:
        return day.replace(year=day.year + years, day=28)


def contract(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    employer, agency = company(fake, rng), company(fake, rng)
    employee = fake.name()
    signed = day_between(rng, date(2018, 1, 1), date(2026, 12, 31))
    years = rng.choice([1, 2, 3, 5])
    term = rng.choice([f"{chinese_number(years)}年", f"{years}年", f"{years * 12}个月"])
    short = rng.random() < 0.4
    b.text("劳动合同摘要\n", f"合同编号：HT-{signed.year}-{rng.randrange(10000):04d}\n")
    b.text("甲方（用人单位）：").value("甲方", employer)
    if short:
        b.text("（以下简称“甲方”）")
    if target:  # registration details only in full documents; brief ones keep just the values
        b.text(f"\n统一社会信用代码：{credit_code(rng)}\n地址：{fake.address()}")
    b.text("\n乙方（劳动者）：").value("乙方", employee)
    if target:
        b.text(f"，身份证号码：{fake.ssn()}，联系电话：{phone(rng, fake.phone_number())}")
    b.text("\n")
    b.pad_to(b.length + target // 3, FILLER[:8], rng)
    if rng.random() >= MISSING:
        start = signed + timedelta(days=rng.randrange(1, 30))
        end = years_later(start, years) - timedelta(days=1)
        b.text("\n一、合同期限：本合同为固定期限劳动合同，期限").value("合同期限", term)
        b.text("，自").mention(date_text(rng, start)).text("起至").mention(date_text(rng, end)).text("止。")
    b.text(f"\n二、工作内容：乙方同意根据甲方工作需要，担任{rng.choice(POSITIONS)}岗位。")
    if rng.random() >= MISSING:
        yuan = rng.randrange(6, 60) * 10000 + rng.choice([0, 0, 5000, rng.randrange(1, 10) * 1000])
        b.text("\n三、劳动报酬：合同金额（年度薪酬总额）为").value("合同金额", amount(rng, yuan)).text("，按月发放。")
    if rng.random() < 0.5:
        b.text("\n本合同由").mention(agency).text("（以下简称“介绍方”）推荐促成，介绍方不是本合同当事人。")
    b.pad_to(target - 60, FILLER[8:], rng)
    b.text("\n本合同于").value("签约日期", date_text(rng, signed))
    if rng.random() >= MISSING:
        b.text("在").value("签约地点", city(fake)).text("签订")
    b.text("，一式两份，双方各执一份。\n甲方（盖章）：").mention("甲方" if short else employer)
    b.text("\n乙方（签字）：").mention(employee).text("\n")
