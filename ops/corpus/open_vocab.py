"""Values built from parts, so that no list of them can be learnt: only copying predicts them.

The generator's first values were Faker's closed lists (131 given names, 83 company prefixes, a few
titles): the demo model learnt them as classes and stopped where a name left them (周 for 周晓梅).
Here:
- people: a surname (model/data/surnames.txt, compound ones included) and one or two common hanzi,
  or a person's name from jieba's dictionary (`nr` words that start with a surname);
- places: jieba's dictionary `ns` words, sometimes with 市/区/县;
- organisations: a place + a made-up or dictionary word + a trade + a legal form, or jieba's `nt`;
- schools and hospitals by pattern (a place + 师范大学 / 职业技术学院 / 第三人民医院 ...);
- job titles and events from a role or a verb and what it acts on.

jieba's dictionary (MIT licence, read from the installed wheel at generation time, nothing derived
is shipped but the trained weights) is a source of names and places; every character is kept inside
the demo tokenizer's common hanzi (GB2312 level 1), or the model could not spell it.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path

# GB2312's first level: the 3,755 most used hanzi, the demo tokenizer's vocabulary.
COMMON_HANZI = frozenset(
    bytes(b for hi in range(0xB0, 0xD8) for lo in range(0xA1, 0xFF) for b in (hi, lo)).decode("gb2312", "ignore")
)
SURNAMES = Path(__file__).resolve().parents[2] / "model" / "data" / "surnames.txt"
# Hanzi common in given names (all in COMMON_HANZI): a name is one or two of them.
GIVEN = (
    "伟芳娜秀英敏静丽强磊军洋勇艳杰娟涛明超霞平刚桂华玉萍红建文辉力晓雪梅琳燕飞鹏宇浩然子轩涵梓欣怡"
    "佳琪思雨桐可馨嘉俊博文昊天宏志凯瑞哲睿宁安康乐心悦诗婷颖彤瑶琦璐婉茹倩薇蕾蓉春秋冬夏兰菊松柏"
    "云峰岩山海波江河林森永长庆福贵荣祥德仁义礼智信忠孝国家民兴华中东西南北新立成亮光辉耀晨曦阳"
    "旭东晖丹青紫宁远航帆振宇泽锦程鸿运晶莹露霖霏韵律清若溪逸尘铭达豪毅彬斌栋梁楠桦"
)
TRADES = (
    "科技", "信息技术", "网络科技", "电子", "物流", "供应链管理", "餐饮管理", "食品", "建材", "建筑工程", "医药",
    "生物科技", "文化传媒", "广告", "环保科技", "新能源", "机械制造", "精密机械", "纺织", "服装", "化工", "商贸",
    "贸易", "房地产开发", "物业管理", "教育咨询", "人力资源", "汽车销售", "农业发展", "酒店管理", "旅游开发",
    "家具", "印务", "电气设备", "软件", "数据服务", "检测技术", "投资管理", "装饰工程", "茶业",
)  # fmt: skip
LEGAL_FORMS = (
    "有限公司", "有限公司", "有限公司", "股份有限公司", "有限责任公司", "集团有限公司", "集团",
    "工作室", "合作社", "商行", "事务所",
)  # fmt: skip
SCHOOL_KINDS = (
    "大学", "师范大学", "理工大学", "科技大学", "财经大学", "医科大学", "农业大学", "工业大学", "师范学院",
    "职业技术学院", "学院", "外国语学院", "第一中学", "实验中学", "职业学院", "艺术学院", "交通大学",
)  # fmt: skip
HOSPITAL_KINDS = (
    "人民医院", "第一人民医院", "第二人民医院", "第三人民医院", "中心医院", "中医院", "中医医院", "妇幼保健院",
    "儿童医院", "骨科医院", "口腔医院", "眼科医院", "肿瘤医院", "中西医结合医院", "社区卫生服务中心",
    "医学院附属医院", "精神卫生中心", "传染病医院",
)  # fmt: skip
ROLE_FIELDS = (
    "Java", "Python", "前端", "后端", "数据", "算法", "测试", "运维", "财务", "会计", "行政", "人事", "仓储",
    "物流", "采购", "销售", "市场", "品牌", "客服", "法务", "质检", "生产", "设备", "电气", "机械", "化工",
    "餐饮", "门店", "招商", "培训", "新媒体", "视频", "电商", "外贸", "护理", "药品", "安全", "工艺",
)  # fmt: skip
ROLES = (
    "工程师", "专员", "经理", "主管", "助理", "操作工", "司机", "教师", "设计师", "顾问", "总监", "文员",
    "技术员", "分析师", "编辑", "专家", "组长", "店长", "代表", "督导", "实习生",
)  # fmt: skip
LEVELS = ("", "", "", "高级", "资深", "初级", "储备", "见习", "首席")
ACTS = (
    "签署", "启动", "发布", "完成", "举办", "成立", "收购", "投产", "开通", "获得", "宣布", "召开", "建成",
)  # fmt: skip
OBJECTS = (
    "战略合作协议", "二期工程", "年度报告", "新一轮融资", "技术交流会", "联合实验室", "物流园区",
    "新生产线", "跨境电商平台", "产学研基地", "公益基金", "乡村振兴项目", "智能工厂", "数字化转型方案",
    "新品发布会", "股东大会", "人才招聘会", "数据中心", "海外分公司", "质量认证",
)  # fmt: skip
ILLNESS_PARTS = (
    ("急性", "慢性", "复发性", "过敏性", "病毒性", "细菌性", ""),
    ("支气管炎", "胃炎", "肠炎", "咽炎", "鼻炎", "结膜炎", "肾炎", "肝炎", "皮炎", "中耳炎", "扁桃体炎",
     "腰椎间盘突出", "关节炎", "心肌炎", "胰腺炎", "阑尾炎", "麻疹", "湿疹", "贫血", "高血压", "偏头痛"),
)  # fmt: skip


def common(word: str) -> bool:
    return all(char in COMMON_HANZI for char in word)


@cache
def surnames() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(single-character, compound) surnames in the tokenizer's vocabulary."""
    words = [w.strip() for w in SURNAMES.read_text(encoding="utf-8").splitlines()]
    words = [w for w in words if w and not w.startswith("#") and common(w)]
    return tuple(w for w in words if len(w) == 1), tuple(w for w in words if len(w) > 1)


@cache
def jieba_words() -> dict[str, tuple[str, ...]]:
    """jieba dictionary words by entity type (`nr` person, `ns` place, `nt` organisation), those a
    value can be: common characters, a plausible length, a person's starting with a surname."""
    import jieba

    single, compound = surnames()
    starts = set(single) | set(compound)
    found: dict[str, list[str]] = {"nr": [], "ns": [], "nt": []}
    with open(Path(jieba.__file__).parent / "dict.txt", encoding="utf-8") as dictionary:
        for line in dictionary:
            word, frequency, tag = line.split()
            if tag not in found or not common(word):
                continue
            keep = {
                "nr": 2 <= len(word) <= 3 and (word[0] in starts or word[:2] in starts),
                "ns": 2 <= len(word) <= 4 and int(frequency) >= 20,  # rarer ones are mostly noise
                "nt": 4 <= len(word) <= 12,
            }
            if keep[tag]:
                found[tag].append(word)
    return {tag: tuple(words) for tag, words in found.items()}


@cache
def given_hanzi() -> str:
    return "".join(dict.fromkeys(char for char in GIVEN if char in COMMON_HANZI))


def given(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(given_hanzi()) for _ in range(length))


def person(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(jieba_words()["nr"])
    single, compound = surnames()
    surname = rng.choice(compound) if rng.random() < 0.06 else rng.choice(single)
    return surname + given(rng, 1 if rng.random() < 0.3 else 2)


def place(rng: random.Random) -> str:
    name = rng.choice(jieba_words()["ns"])
    suffix = rng.choice(["", "", "市", "市", "区", "县"]) if len(name) == 2 else ""
    return name + suffix


def organisation(rng: random.Random) -> str:
    if rng.random() < 0.12:
        return rng.choice(jieba_words()["nt"])
    # A made-up brand of two common hanzi, or a place word used as one.
    brand = given(rng, 2) if rng.random() < 0.7 else rng.choice(jieba_words()["ns"])[:2]
    head = place(rng).removesuffix("市").removesuffix("县") if rng.random() < 0.7 else ""
    return head + brand + rng.choice(TRADES) + rng.choice(LEGAL_FORMS)


def school(rng: random.Random) -> str:
    return place(rng).removesuffix("市").removesuffix("区").removesuffix("县") + rng.choice(SCHOOL_KINDS)


def hospital(rng: random.Random) -> str:
    head = place(rng)
    return head + rng.choice(HOSPITAL_KINDS) if rng.random() < 0.8 else head + "市" + given(rng, 2) + "医院"


def job_title(rng: random.Random) -> str:
    return rng.choice(LEVELS) + rng.choice(ROLE_FIELDS) + rng.choice(ROLES)


def event(rng: random.Random) -> str:
    return rng.choice(ACTS) + rng.choice(OBJECTS)


def illness(rng: random.Random) -> str:
    return rng.choice(ILLNESS_PARTS[0]) + rng.choice(ILLNESS_PARTS[1])


def email(rng: random.Random) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    user = "".join(rng.choice(letters) for _ in range(rng.randrange(3, 9)))
    user += rng.choice(["", "", str(rng.randrange(1, 999)), f"_{rng.randrange(70, 100)}", "." + rng.choice(letters)])
    domain = rng.choice(["163.com", "126.com", "qq.com", "foxmail.com", "sina.com", "outlook.com", "gmail.com"])
    if rng.random() < 0.3:
        made_up = "".join(rng.choice(letters) for _ in range(rng.randrange(3, 8)))
        domain = made_up + rng.choice([".com", ".cn", ".com.cn"])
    return f"{user}@{domain}"
