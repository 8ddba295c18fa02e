"""Names, organisations and places from Faker's zh_CN provider, plus the few lists it lacks."""

from __future__ import annotations

import random
from datetime import date, timedelta

from faker import Faker

SCHOOLS = [
    "复旦大学",
    "浙江大学",
    "武汉大学",
    "南京大学",
    "四川大学",
    "中山大学",
    "同济大学",
    "华中科技大学",
    "厦门大学",
]
DEGREES = ["大专", "本科", "硕士研究生", "博士研究生"]
POSITIONS = [
    "后端开发工程师",
    "数据分析师",
    "产品经理",
    "销售主管",
    "财务专员",
    "人力资源专员",
    "测试工程师",
    "运营经理",
]
DIAGNOSES = ["急性支气管炎", "2型糖尿病", "原发性高血压", "腰椎间盘突出症", "慢性浅表性胃炎", "过敏性鼻炎", "颈椎病"]
DEPARTMENTS = ["内科", "外科", "骨科", "消化内科", "呼吸内科", "内分泌科", "耳鼻喉科"]
HOSPITAL_KINDS = ["市第一人民医院", "市中心医院", "市中医院", "大学附属医院"]
EVENTS = [
    "完成B轮融资",
    "发布新一代智能物流平台",
    "签署战略合作协议",
    "启动区域总部建设项目",
    "通过国家高新技术企业认定",
]


def company(fake: Faker, rng: random.Random) -> str:
    name = fake.company()
    # Faker's names rarely carry a city; real registrations often do.
    return fake.city_name() + name if rng.random() < 0.5 else name


def city(fake: Faker) -> str:
    return fake.city_name() + "市"


def day_between(rng: random.Random, first: date, last: date) -> date:
    return first + timedelta(days=rng.randrange((last - first).days + 1))


def credit_code(rng: random.Random) -> str:
    return "91" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRTUWXY") for _ in range(16))
