"""Seeded sample documents for the demo and the tests: short Chinese business texts in the
`RawDocument` format, one per named field set, with the values they contain.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗高"
GIVEN = ["伟", "芳", "娜", "秀英", "敏", "静", "强", "磊", "洋", "艳", "勇", "军", "杰", "娟", "涛", "明", "超", "霞"]
CITIES = ["北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "武汉", "西安", "苏州"]
TRADES = ["科技", "贸易", "物流", "医药", "建设", "信息技术", "文化传媒", "新能源"]
SUFFIXES = ["有限公司", "有限责任公司", "股份有限公司"]
SCHOOLS = ["复旦大学", "浙江大学", "武汉大学", "南京大学", "四川大学", "中山大学"]
DIAGNOSES = ["急性支气管炎", "2型糖尿病", "高血压病", "腰椎间盘突出", "慢性胃炎"]
POSITIONS = ["后端工程师", "数据分析师", "产品经理", "销售主管", "财务专员"]


def _person(rng: random.Random) -> str:
    return rng.choice(SURNAMES) + rng.choice(GIVEN)


def _company(rng: random.Random) -> str:
    return (
        rng.choice(CITIES)
        + rng.choice(["华", "远", "恒", "新", "博", "瑞"])
        + rng.choice(["信", "达", "通", "安"])
        + (rng.choice(TRADES) + rng.choice(SUFFIXES))
    )


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2019, 2026)}年{rng.randint(1, 12)}月{rng.randint(1, 28)}日"


def _phone(rng: random.Random) -> str:
    return "1" + rng.choice("3456789") + "".join(rng.choice("0123456789") for _ in range(9))


def contract(rng: random.Random) -> tuple[str, dict[str, str]]:
    v = {
        "甲方": _company(rng),
        "乙方": _person(rng),
        "签约日期": _date(rng),
        "合同金额": f"人民币{rng.randint(5, 90)}万元",
    }
    v["签约地点"] = rng.choice(CITIES)
    text = (
        f"劳动合同摘要。甲方：{v['甲方']}（以下简称“甲方”），乙方：{v['乙方']}。双方经平等协商，"
        f"于{v['签约日期']}在{v['签约地点']}签订本合同，合同金额为{v['合同金额']}，合同期限三年。"
    )
    return text, v


def resume(rng: random.Random) -> tuple[str, dict[str, str]]:
    v = {"姓名": _person(rng), "手机号码": _phone(rng), "毕业院校": rng.choice(SCHOOLS), "工作单位": _company(rng)}
    text = (
        f"个人简历。姓名：{v['姓名']}，联系电话{v['手机号码']}。{rng.randint(2008, 2020)}年毕业于{v['毕业院校']}，"
        f"现就职于{v['工作单位']}，负责核心业务系统的设计与开发。"
    )
    return text, v


def job_ad(rng: random.Random) -> tuple[str, dict[str, str]]:
    v = {"公司名称": _company(rng), "职位名称": rng.choice(POSITIONS), "工作地点": rng.choice(CITIES)}
    v["薪资范围"] = f"{rng.randint(8, 20)}-{rng.randint(21, 40)}K"
    text = (
        f"招聘启事：{v['公司名称']}诚聘{v['职位名称']}，工作地点{v['工作地点']}，"
        f"薪资{v['薪资范围']}，要求本科及以上学历，三年以上相关经验。"
    )
    return text, v


def news(rng: random.Random) -> tuple[str, dict[str, str]]:
    v = {"发布机构": _company(rng), "发布日期": _date(rng), "人物": _person(rng), "地点": rng.choice(CITIES)}
    text = (
        f"新闻通稿（{v['发布日期']}）{v['发布机构']}今日在{v['地点']}宣布完成新一轮融资，"
        f"董事长{v['人物']}表示，资金将用于研发投入与市场拓展。"
    )
    return text, v


def medical(rng: random.Random) -> tuple[str, dict[str, str]]:
    v = {"患者姓名": _person(rng), "就诊日期": _date(rng), "诊断结果": rng.choice(DIAGNOSES), "主治医师": _person(rng)}
    v["医院名称"] = rng.choice(CITIES) + "市第一人民医院"
    text = (
        f"门诊病历。患者{v['患者姓名']}于{v['就诊日期']}到{v['医院名称']}就诊，"
        f"经检查诊断为{v['诊断结果']}，主治医师{v['主治医师']}建议复查。"
    )
    return text, v


KINDS = {"contract": contract, "resume": resume, "job_ad": job_ad, "news": news, "medical": medical}


def sample_documents(count: int, seed: int = 0) -> Iterator[tuple[dict, dict[str, str]]]:
    """`count` (RawDocument dict, values it contains) pairs, cycling through the field sets."""
    rng = random.Random(seed)
    names = sorted(KINDS)
    for i in range(count):
        kind = names[i % len(names)]
        text, values = KINDS[kind](rng)
        yield {"doc_id": f"{kind}-{seed}-{i:05d}", "text": text, "field_set": kind}, values
