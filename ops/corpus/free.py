"""Free-phrased documents for training: the same five kinds, written as people write them.

The templated kinds (contract.py, hiring.py, reports.py) put each value after a fixed cue
(`甲方（用人单位）：`), so a small model learns the cue and the generator's value lists, not copying.
Here each value comes in one of several sentences, the sentences are shuffled and joined by varied
connecting words and punctuation, values are drawn from wide pools (Faker names, cities and
companies, many titles and diagnoses), and a value is left out often: the only way to lower the
loss is to find the value in the text, or answer `None`.

A sentence template is a string with `{label}` slots for values (`DocumentBuilder.value`) and
`{~name}` slots for distractors (`mention`); a template whose value is missing is not used.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from datetime import date, timedelta

from faker import Faker

from ops.corpus.builder import DocumentBuilder
from ops.corpus.parts import DEGREES, HOSPITAL_KINDS, SCHOOLS, city, company, day_between
from ops.corpus.surface import amount, chinese_number, date_text, full_width, phone

MISSING = 0.25
SLOT = re.compile(r"\{(~?[^{}]+)\}")
# Sentence ends and the connecting words between sentences: the text's rhythm must not be a cue.
ENDS = ["。", "。", "。", "；", "！", "\n", "。\n", "，"]
CONNECTORS = [
    "", "", "", "", "", "", "另外，", "此外，", "同时，", "需要说明的是，", "据悉，", "经确认，", "备注：", "补充：",
]  # fmt: skip
TITLES = [
    "前端开发工程师", "算法工程师", "运维工程师", "嵌入式软件工程师", "市场专员", "品牌经理", "会计",
    "出纳", "行政助理", "法务专员", "采购经理", "仓库管理员", "客服主管", "平面设计师", "UI设计师",
    "销售代表", "区域经理", "项目经理", "质量工程师", "机械工程师", "电气工程师", "护士", "药剂师",
    "物流调度员", "店长", "厨师", "教师", "翻译", "审计专员", "数据工程师", "产品运营", "商务拓展经理",
]  # fmt: skip
ILLNESSES = [
    "上呼吸道感染", "社区获得性肺炎", "慢性阻塞性肺疾病", "冠状动脉粥样硬化性心脏病", "高脂血症", "痛风",
    "缺铁性贫血", "甲状腺功能亢进症", "带状疱疹", "急性胃肠炎", "胆囊结石", "肾结石", "骨质疏松症",
    "偏头痛", "失眠症", "湿疹", "结膜炎", "慢性咽炎", "腰肌劳损", "膝关节骨性关节炎", "荨麻疹", "支气管哮喘",
]  # fmt: skip
HAPPENINGS = [
    "正式开业", "发布年度可持续发展报告", "完成A轮融资", "与多家高校共建联合实验室", "推出新款新能源车型",
    "启动智慧园区二期工程", "获得国家专利金奖", "举办首届开发者大会", "宣布进军东南亚市场",
    "完成对一家软件企业的收购", "上线全新移动支付服务", "签订年度供货框架协议", "成立人工智能研究院",
]  # fmt: skip
UNIVERSITIES = [*SCHOOLS, "北京大学", "清华大学", "山东大学", "吉林大学", "西安交通大学", "哈尔滨工业大学",
                "东南大学", "湖南大学", "重庆大学", "郑州大学", "苏州大学", "华南理工大学", "北京师范大学"]  # fmt: skip
SCHOOLING = [*DEGREES, "中专", "高中", "硕士", "博士", "本科学历", "研究生学历"]

TEMPLATES: dict[str, list[str]] = {
    "contract": [
        "{甲方}与{乙方}经友好协商签订本劳动合同",
        "用人单位{甲方}聘用{乙方}",
        "本合同的双方为{甲方}（甲方）和{乙方}（乙方）",
        "甲方是{甲方}",
        "受聘人{乙方}同意按甲方安排工作",
        "员工{乙方}",
        "乙方{乙方}，身份证件已核验",
        "合同期为{合同期限}",
        "双方约定聘用期限{合同期限}，期满可续签",
        "本合同有效期{合同期限}，自{~起始日}起算",
        "乙方年薪合计{合同金额}",
        "甲方每年向乙方支付报酬{合同金额}，分十二个月发放",
        "薪酬总额为{合同金额}（税前）",
        "本合同于{签约日期}签订",
        "签署时间：{签约日期}",
        "双方于{签约日期}在{签约地点}签字盖章",
        "签订地点为{签约地点}",
        "合同在{签约地点}签署，一式两份",
        "推荐机构{~中介}不是合同当事人",
        "乙方入职前曾就职于{~前雇主}",
    ],
    "job_ad": [
        "{公司名称}现招聘{职位名称}若干名",
        "{公司名称}诚邀优秀的{职位名称}加入",
        "招聘单位：{公司名称}",
        "我们是{公司名称}，因业务发展需要，招募{职位名称}",
        "岗位：{职位名称}",
        "现开放{职位名称}职位，名额有限",
        "工作城市为{工作地点}",
        "办公地点位于{工作地点}，交通便利",
        "上班地点：{工作地点}",
        "月薪{薪资范围}，五险一金",
        "待遇面议，参考范围{薪资范围}",
        "薪酬：{薪资范围}，另有年终奖",
        "要求{学历要求}，有相关经验者优先",
        "学历：{学历要求}",
        "应聘者需具备{学历要求}",
        "有意者请致电{联系电话}",
        "咨询电话{联系电话}，工作日九点到六点",
        "联系方式：{联系电话}",
        "本岗位服务的客户包括{~客户}",
    ],
    "resume": [
        "我叫{姓名}，{性别}，{出生日期}出生",
        "姓名：{姓名}",
        "本人{姓名}，现年三十岁左右",
        "{姓名}，{性别}",
        "性别{性别}",
        "出生于{出生日期}",
        "生日：{出生日期}",
        "联系电话{手机号码}",
        "手机：{手机号码}，欢迎来电",
        "可通过{手机号码}或{电子邮箱}联系我",
        "邮箱：{电子邮箱}",
        "电子邮件{电子邮箱}",
        "毕业于{毕业院校}，学历为{学历}",
        "{学历}毕业，母校是{毕业院校}",
        "教育背景：{毕业院校}，{学历}",
        "最高学历：{学历}",
        "目前就职于{工作单位}",
        "现任职单位：{工作单位}",
        "在{工作单位}工作至今，此前在{~前雇主}任职",
        "曾在{~前雇主}实习半年",
    ],
    "news": [
        "{发布机构}于{发布日期}在{地点}宣布{事件}",
        "本报{地点}电（{发布日期}）{发布机构}今日{事件}",
        "{发布日期}，{发布机构}对外发布消息称，公司已{事件}",
        "发布单位：{发布机构}",
        "日期：{发布日期}",
        "活动在{地点}举行",
        "此次{事件}受到业内广泛关注",
        "董事长{人物}在现场致辞",
        "{人物}表示，公司将继续加大投入",
        "{组织机构}代表{人物}出席了活动",
        "合作方{组织机构}也派员参加",
        "来自{组织机构}的专家进行了点评",
    ],
    "medical": [
        "{医院名称}门诊病历",
        "就诊医院：{医院名称}",
        "患者{患者姓名}，{性别}，{年龄}",
        "姓名：{患者姓名}",
        "病人{患者姓名}因不适前来就诊",
        "性别：{性别}",
        "年龄{年龄}",
        "{就诊日期}来院就诊",
        "就诊时间：{就诊日期}",
        "于{就诊日期}至{医院名称}就诊",
        "初步诊断为{诊断结果}",
        "临床诊断：{诊断结果}",
        "考虑{诊断结果}，建议随访",
        "接诊医生{主治医师}",
        "主治医师：{主治医师}",
        "由{主治医师}医生负责诊治",
        "审核：{~审核医师}",
        "家属{~家属}陪同就诊",
    ],
}
FILLERS = [
    "以上内容如有疑问请及时沟通", "具体事项以双方书面确认为准", "详情请见附件", "本文件仅供内部使用",
    "请妥善保管本文件", "相关安排可能视情况调整", "如有变动将另行通知", "感谢各方的支持与配合",
]  # fmt: skip
HEADERS = {
    "contract": ["劳动合同", "聘用协议", "劳动合同（摘要）", "用工协议书", ""],
    "job_ad": ["招聘启事", "【急聘】", "诚聘英才", "招聘信息", ""],
    "resume": ["个人简历", "简历", "求职简历", "个人简介", ""],
    "news": ["新闻稿", "企业动态", "快讯", "新闻发布", ""],
    "medical": ["门诊病历", "诊断证明", "就诊记录", "病情摘要", ""],
}


def punctuation(rng: random.Random):
    """Half-width punctuation for some documents' connecting text (never a value's)."""
    if rng.random() < 0.7:
        return lambda text: text
    table = str.maketrans({"，": ",", "：": ":", "；": ";", "（": "(", "）": ")"})
    return lambda text: text.translate(table)


def values_for(kind: str, fake: Faker, rng: random.Random) -> dict[str, str]:
    """One value per slot of `kind` (labels and `~` distractors); the document drops some labels."""
    day = day_between(rng, date(2015, 1, 1), date(2027, 12, 31))
    if kind == "contract":
        years = rng.choice([1, 2, 3, 5, 10])
        term = rng.choice([f"{chinese_number(years)}年", f"{years}年", f"{years * 12}个月", f"{years}年期"])
        yuan = rng.randrange(3, 90) * 10000 + rng.choice([0, 0, 5000, rng.randrange(1, 10) * 1000])
        start = date_text(rng, day + timedelta(days=rng.randrange(1, 30)))
        return {
            "甲方": company(fake, rng), "乙方": fake.name(), "合同期限": term, "合同金额": amount(rng, yuan),
            "签约日期": date_text(rng, day), "签约地点": city(fake) if rng.random() < 0.7 else fake.city_name(),
            "~起始日": start, "~中介": company(fake, rng), "~前雇主": company(fake, rng),
        }  # fmt: skip
    if kind == "job_ad":
        low = rng.randrange(3, 40)
        salary = rng.choice(
            [f"{low}-{low + rng.randrange(2, 20)}K", f"{low}k-{low + 8}k", f"{low * 1000}-{low * 1500}元/月",
             f"{low}千至{low + 5}千元", f"年薪{low}-{low + 10}万"]
        )  # fmt: skip
        degree = rng.choice(SCHOOLING)
        place = rng.choice([city(fake), fake.city_name(), city(fake) + fake.district() + "区"])
        return {
            "公司名称": company(fake, rng), "职位名称": rng.choice(TITLES), "工作地点": place, "薪资范围": salary,
            "学历要求": rng.choice([f"{degree}及以上学历", f"{degree}以上", degree]),
            "联系电话": phone(rng, fake.phone_number()), "~客户": company(fake, rng),
        }  # fmt: skip
    if kind == "resume":
        born = day_between(rng, date(1965, 1, 1), date(2004, 12, 31))
        return {
            "姓名": fake.name(), "性别": rng.choice(["男", "女"]), "出生日期": date_text(rng, born),
            "手机号码": phone(rng, fake.phone_number()), "电子邮箱": rng.choice([fake.free_email(), fake.email()]),
            "毕业院校": rng.choice(UNIVERSITIES), "学历": rng.choice(SCHOOLING), "工作单位": company(fake, rng),
            "~前雇主": company(fake, rng),
        }  # fmt: skip
    if kind == "news":
        return {
            "发布机构": company(fake, rng), "发布日期": date_text(rng, day), "地点": city(fake),
            "人物": fake.name(), "组织机构": company(fake, rng), "事件": rng.choice(HAPPENINGS),
        }  # fmt: skip
    age = rng.randrange(1, 95)
    hospital = fake.city_name() + rng.choice([*HOSPITAL_KINDS, "人民医院", "妇幼保健院", "第二医院", "中西医结合医院"])
    return {
        "患者姓名": fake.name(), "性别": rng.choice(["男", "女"]), "诊断结果": rng.choice(ILLNESSES),
        "年龄": rng.choice([f"{age}岁", full_width(f"{age}") + "岁", f"{chinese_number(age)}岁", f"{age}周岁"]),
        "就诊日期": date_text(rng, day), "主治医师": fake.name(), "医院名称": hospital,
        "~审核医师": fake.name(), "~家属": fake.name(),
    }  # fmt: skip


def free_document(
    kind: str, fake: Faker, rng: random.Random, b: DocumentBuilder, target: int, values: dict[str, str] | None = None
) -> None:
    """A free-phrased document of `kind` into `b`: shuffled sentences covering the kept values, each
    value written once or twice, with fillers to about `target` characters (0: none). `values`:
    one per slot as `values_for` draws them (default: drawn here)."""
    values = values or values_for(kind, fake, rng)
    labels = [label for label in values if not label.startswith("~")]
    kept = {label for label in labels if rng.random() >= MISSING} or {rng.choice(labels)}
    values = {k: v for k, v in values.items() if k.startswith("~") or k in kept}
    templates = [t for t in TEMPLATES[kind] if all(slot in values for slot in SLOT.findall(t))]
    rng.shuffle(templates)
    chosen, covered = [], set()
    for template in templates:
        slots = set(SLOT.findall(template))
        new = slots & kept - covered
        # A sentence that says nothing new is kept now and then: values are repeated in real text.
        if new or (rng.random() < 0.15 and len(chosen) < 12):
            chosen.append(template)
            covered |= slots
    if target:
        chosen += rng.sample(FILLERS, rng.randrange(1, 4))
        rng.shuffle(chosen)
    header = rng.choice(HEADERS[kind])
    if header:
        b.text(header, rng.choice(["\n", "：", " ", "\n\n"]))
    for template in chosen:
        b.text(rng.choice(CONNECTORS))
        write(b, template, values)
        b.text(rng.choice(ENDS))


def write(b: DocumentBuilder, template: str, values: Mapping[str, str]) -> None:
    """`template` into `b`, its slots filled: labels as values, `~` slots as mentions."""
    pieces: Sequence[str] = SLOT.split(template)
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            if piece:
                b.text(piece)
        elif piece.startswith("~"):
            b.mention(values[piece])
        else:
            b.value(piece, values[piece])
