"""新闻通稿 and 医疗报告. Distractors: the report date and the reviewing doctor in a medical report."""

from __future__ import annotations

import random
from datetime import date, timedelta

from faker import Faker

from ops.corpus.builder import DocumentBuilder
from ops.corpus.parts import DEPARTMENTS, DIAGNOSES, EVENTS, HOSPITAL_KINDS, city, company, day_between
from ops.corpus.surface import chinese_number, date_text, full_width, phone

MISSING = 0.15
NEWS_FILLER = [
    "据介绍，该项目总投资规模可观，建成后将新增就业岗位数百个。",
    "与会嘉宾围绕行业发展趋势、技术创新和可持续发展等话题进行了深入交流。",
    "公司相关负责人介绍，新产品在性能和能耗方面均较上一代有明显提升。",
    "当地有关部门负责人表示，将持续优化营商环境，支持企业做大做强。",
    "此次合作是双方优势互补、互利共赢的重要举措。",
    "公司近三年营业收入保持两位数增长，盈利能力稳步增强。",
    "多家机构发布研报，对公司未来发展前景给予积极评价。",
    "公司同时宣布，将设立专项基金用于支持青年科技人才培养。",
    "据了解，该平台已在多个城市试点运行，用户反馈良好。",
    "业内人士认为，此举将进一步巩固其在行业内的领先地位。",
    "据悉，相关项目预计将在未来三年内带动上下游产业链协同发展。",
    "近年来，公司持续加大研发投入，研发人员占比超过百分之三十。",
    "公司表示，将继续坚持创新驱动发展战略，为客户创造更大价值。",
    "本次活动吸引了来自政府部门、行业协会和合作伙伴的百余名嘉宾参加。",
    "分析人士指出，随着市场需求回暖，行业整体有望保持稳定增长。",
    "公司产品已覆盖全国多个省份，并出口至东南亚和欧洲市场。",
    "未来，双方将在技术研发、人才培养和市场拓展等方面开展深入合作。",
    "活动现场还举行了项目签约仪式和产品展示环节。",
    "以上信息仅供媒体参考，具体内容以公司正式公告为准。",
    "公司成立以来，累计服务客户数量已突破十万家。",
]
MEDICAL_FILLER = [
    "个人史：生活规律，否认吸烟、饮酒等不良嗜好。",
    "家族史：否认家族遗传病史。",
    "专科检查：局部无明显红肿，压痛阳性，活动轻度受限。",
    "生命体征：体温三十六点五摄氏度，脉搏七十八次每分，血压在正常范围内。",
    "心电图检查提示窦性心律，未见明显异常改变。",
    "影像学检查：所见结构基本清晰，建议结合临床综合判断。",
    "用药指导：按时按量服药，服药期间如出现不良反应请立即停药并就医。",
    "健康宣教：适当运动，控制体重，保证充足睡眠，保持心情舒畅。",
    "门诊随访：建议在一个月内复诊，评估治疗效果并调整方案。",
    "主诉：反复不适一月余，加重三天，无发热，无明显体重下降。",
    "现病史：患者自述近期症状间断出现，休息后可稍缓解，未经系统治疗。",
    "既往史：否认肝炎、结核等传染病史，否认重大手术及外伤史。",
    "过敏史：否认药物及食物过敏史。",
    "体格检查：神志清楚，精神可，心肺听诊未闻及明显异常。",
    "辅助检查：血常规、生化指标基本正常，影像学检查提示轻度改变。",
    "处理意见：注意休息，清淡饮食，避免劳累，按医嘱规律用药。",
    "如症状加重或出现其他不适，请及时来院复诊。",
    "建议两周后门诊复查，必要时进一步完善相关检查。",
    "本报告仅供临床参考，不作为其他用途的证明文件。",
    "医嘱：遵医嘱服药，定期监测相关指标，保持良好生活习惯。",
]


def news(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    publisher, partner = company(fake, rng), company(fake, rng)
    b.value("发布机构", publisher).text("新闻通稿\n")
    b.text("（").value("发布日期", date_text(rng, day_between(rng, date(2019, 1, 1), date(2026, 12, 31)))).text("，")
    b.value("地点", city(fake)).text("）").mention(publisher).text("今日宣布").value("事件", rng.choice(EVENTS))
    b.text("。")
    b.pad_to(b.length + target // 3, NEWS_FILLER[:5], rng)
    b.text("\n公司董事长").value("人物", fake.name()).text("在发布会上表示，这是公司发展历程中的重要一步。")
    if rng.random() >= MISSING:
        b.text("\n").value("组织机构", partner).text("副总裁").value("人物", fake.name()).text("出席了仪式并致辞。")
    b.pad_to(target - 40, NEWS_FILLER[5:], rng)
    b.text(f"\n媒体联系电话：{phone(rng, fake.phone_number())}\n")


def medical(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    hospital = fake.city_name() + rng.choice(HOSPITAL_KINDS)
    visit = day_between(rng, date(2019, 1, 1), date(2026, 12, 31))
    age = rng.randrange(3, 90)
    b.value("医院名称", hospital).text("\n门诊诊断报告\n")
    b.text("姓名：").value("患者姓名", fake.name())
    if rng.random() >= MISSING:
        b.text("  性别：").value("性别", rng.choice(["男", "女"]))
    if rng.random() >= MISSING:
        b.text("  年龄：").value(
            "年龄", rng.choice([f"{age}岁", full_width(f"{age}") + "岁", f"{chinese_number(age)}岁"])
        )
    b.text(f"  门诊号：{rng.randrange(10**7, 10**8)}\n")
    b.text("就诊日期：").value("就诊日期", date_text(rng, visit)).text(f"  科室：{rng.choice(DEPARTMENTS)}\n")
    b.pad_to(b.length + target // 2, MEDICAL_FILLER[:6], rng)
    b.text("\n诊断：").value("诊断结果", rng.choice(DIAGNOSES)).text("\n")
    b.pad_to(target - 60, MEDICAL_FILLER[6:], rng)
    b.text("\n主治医师：").value("主治医师", fake.name()).text("  审核医师：").mention(fake.name())
    b.text("\n报告日期：").mention(date_text(rng, visit + timedelta(days=rng.randrange(0, 3)))).text(
        f"\n地址：{city(fake)}\n"
    )
