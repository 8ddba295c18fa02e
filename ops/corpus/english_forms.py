"""English and mixed forms of the values that are not names, for mixed_script.py's reshaping.

Hand-written bilingual documents write sex, degree, school, job title, salary, age, term,
diagnosis, hospital, event and news source in English or half in English as often as names
(Male, Bachelor's degree, Senior Data Engineer, 25k-35k/month, 35 years old, 18 months, Acute
bronchitis, ... People's Hospital). Built from parts, like every open-vocabulary value.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ops.corpus import open_vocab as ov

SYLLABLES = (
    "an", "ao", "bai", "bo", "chen", "cheng", "chun", "da", "dong", "fang", "fei", "gang", "guo", "hai", "hao",
    "hong", "hua", "hui", "jia", "jian", "jie", "jin", "jun", "kai", "lan", "lei", "li", "liang", "lin", "ling",
    "long", "mei", "min", "ming", "na", "ning", "peng", "ping", "qi", "qiang", "qing", "rui", "shan", "sheng",
    "shu", "song", "tao", "ting", "wei", "wen", "xia", "xiang", "xiao", "xin", "xu", "yan", "yang", "yi", "ying",
    "yong", "yu", "yuan", "yun", "ze", "zhen", "zhi", "zhong", "zhou",
)  # fmt: skip
DEGREES = (
    "Bachelor", "Master", "PhD", "MBA", "Bachelor's degree", "Master's degree", "B.Sc.", "M.Sc.", "本科 Bachelor",
    "硕士 Master",
)  # fmt: skip
REQUIRED = ("Bachelor or above", "Master preferred", "Bachelor+", "College degree", "本科 or above", "不限 / Any")
LEVELS_EN = ("", "", "Senior ", "Junior ", "Lead ", "Principal ", "Assistant ")
FIELDS_EN = (
    "Java", "Python", "Data", "Frontend", "Backend", "Sales", "Marketing", "HR", "Finance", "Product", "QA",
    "DevOps", "AI", "Supply Chain", "Brand", "Legal", "Operations", "Algorithm", "iOS", "Android",
)  # fmt: skip
ROLES_EN = ("Engineer", "Manager", "Analyst", "Designer", "Specialist", "Intern", "Director", "Consultant", "Lead")
ILLNESS_EN = (
    ("Acute ", "Chronic ", "Allergic ", "Viral ", ""),
    ("bronchitis", "gastritis", "rhinitis", "dermatitis", "hypertension", "migraine", "pneumonia", "tonsillitis",
     "sinusitis", "otitis media", "enteritis", "arthritis"),
)  # fmt: skip
HOSPITAL_EN = ("People's Hospital", "Central Hospital", "International Medical Center", "Women and Children's Hospital")
MEDIA_EN = ("Daily", "News", "Times", "Media", "Post", "Weekly", "Herald", "Observer")
TOPICS = ("AI", "SaaS", "IoT", "ESG", "App", "5G", "ERP", "CRM", "GPU", "B2B")
THINGS = ("平台", "项目", "系统", "战略合作协议", "发布会", "产品线", "实验室", "峰会")


def pinyin_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables)).capitalize()


def city(rng: random.Random) -> str:
    return pinyin_word(rng, 2)


def sex(rng: random.Random) -> str:
    return rng.choice(["Male", "Female", "M", "F", "男 Male", "女 Female"])


def degree(rng: random.Random) -> str:
    return rng.choice(DEGREES)


def required(rng: random.Random) -> str:
    return rng.choice(REQUIRED)


def school(rng: random.Random) -> str:
    place = city(rng)
    return rng.choice([
        f"{place} University", f"University of {place}", f"{place} Normal University",
        f"{place} University of Technology", f"{place} Institute of Technology", f"{place} College",
    ])  # fmt: skip


def job_title(rng: random.Random) -> str:
    field, role = rng.choice(FIELDS_EN), rng.choice(ROLES_EN)
    return rng.choice([
        f"{rng.choice(LEVELS_EN)}{field} {role}", f"{field}{rng.choice(ov.ROLES)}",
        f"{rng.choice(ov.LEVELS)}{field}工程师", f"{field} {role}（{rng.choice(ov.ROLES)}）",
    ])  # fmt: skip


def salary(rng: random.Random) -> str:
    low = rng.randrange(5, 60)
    high = low + rng.randrange(3, 30)
    return rng.choice([
        f"{low}k-{high}k/month", f"RMB {low},000-{high},000/月", f"{low}K-{high}K·{rng.randrange(13, 17)}薪",
        f"USD {low * 2}k-{high * 2}k/year", f"{low}-{high}k", f"月薪{low}k-{high}k", "Negotiable",
    ])  # fmt: skip


def age(rng: random.Random) -> str:
    years = rng.randrange(1, 96)
    return rng.choice([f"{years} years old", f"{years}y", f"{years} yrs", f"{years} 岁", f"Age {years}"])


def term(rng: random.Random) -> str:
    months = rng.choice([3, 6, 9, 12, 18, 24, 36, 48, 60])
    return rng.choice([f"{months} months", f"{months // 12 or 1} year(s)", f"{months}个月", f"{months} Months"])


def diagnosis(rng: random.Random) -> str:
    english = rng.choice(ILLNESS_EN[0]) + rng.choice(ILLNESS_EN[1])
    return english.capitalize() if rng.random() < 0.5 else english


def hospital(rng: random.Random) -> str:
    return rng.choice([f"{city(rng)} {rng.choice(HOSPITAL_EN)}", f"{ov.hospital(rng)} {city(rng)} Branch"])


def event(rng: random.Random) -> str:
    topic = rng.choice(TOPICS)
    act, thing = rng.choice(ov.ACTS), rng.choice(THINGS)
    return rng.choice([f"{act}{topic}{thing}", f"{act} {topic} {thing}", f"{act}{city(rng)} {topic}{thing}"])


def media(rng: random.Random) -> str:
    return rng.choice([f"{city(rng)} {rng.choice(MEDIA_EN)}", f"{city(rng).upper()} {rng.choice(MEDIA_EN)}"])


# Label -> a maker of its English or mixed form.
MAKERS: dict[str, Callable[[random.Random], str]] = {
    "性别": sex, "学历": degree, "学历要求": required, "毕业院校": school, "职位名称": job_title,
    "薪资范围": salary, "年龄": age, "合同期限": term, "诊断结果": diagnosis, "医院名称": hospital,
    "事件": event, "发布机构": media, "工作地点": city,
}  # fmt: skip
