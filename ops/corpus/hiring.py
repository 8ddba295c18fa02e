"""招聘JD and 简历. Distractors: a client company in the job ad, a former employer in the résumé."""

from __future__ import annotations

import random
from datetime import date

from faker import Faker

from ops.corpus.builder import DocumentBuilder
from ops.corpus.parts import DEGREES, POSITIONS, SCHOOLS, city, company, day_between
from ops.corpus.surface import date_text, full_width, phone

MISSING = 0.15
JOB_FILLER = [
    "加入我们，你将与行业资深专家共事，参与公司核心产品的研发与迭代。",
    "表现优秀者可获得股票期权激励，晋升通道清晰，每年两次调薪机会。",
    "新员工入职后将接受为期两周的系统培训，并配备导师一对一指导。",
    "岗位要求：具备三年以上相关工作经验，熟悉行业常用工具和方法。",
    "能够独立完成工作任务，具备良好的问题分析与解决能力。",
    "对工作有热情，责任心强，愿意接受挑战并持续学习新知识。",
    "公司注重员工身心健康，设有健身房、图书角和员工休息区。",
    "团队氛围开放，鼓励创新，重视每一位成员的想法与贡献。",
    "应聘者请将个人简历及作品发送至公司招聘邮箱，邮件标题注明姓名和岗位。",
    "本岗位长期有效，招满即止，符合条件者将在五个工作日内收到面试通知。",
    "公司秉承“客户第一、诚信务实”的经营理念，业务覆盖全国二十多个省市。",
    "我们提供具有竞争力的薪酬、完善的培训体系和广阔的职业发展空间。",
    "岗位职责：负责相关业务模块的规划、设计与落地，推动项目按期交付。",
    "配合团队完成日常工作，撰写相关文档，参与技术或业务方案评审。",
    "具备良好的沟通能力、团队合作精神和较强的抗压能力。",
    "有相关行业经验者优先，能适应短期出差者优先。",
    "福利待遇：五险一金、带薪年假、节日福利、年度体检、定期团建。",
    "公司实行弹性工作制，提供餐补、交通补贴和通讯补贴。",
    "熟悉常用办公软件，具备较强的数据分析和逻辑思维能力。",
    "欢迎有志之士加入，与公司共同成长。简历请注明应聘岗位。",
    "面试流程：简历筛选、初试、复试、录用通知，全程约两周。",
    "公司办公环境优越，交通便利，周边生活配套齐全。",
]
RESUME_FILLER = [
    "项目经历：负责公司核心系统的需求调研、方案设计与上线实施，系统上线后运行稳定。",
    "组织并推动跨部门协同项目，协调资源解决关键问题，项目获得公司年度优秀项目奖。",
    "负责团队新人培养，编写岗位培训材料，帮助多名新同事快速胜任工作。",
    "优化原有业务流程，使平均处理时长缩短约三成，客户满意度明显提升。",
    "在校期间参加全国大学生竞赛并获得省级二等奖。",
    "掌握数据分析方法，能够使用常见工具完成报表制作与业务分析。",
    "性格开朗，适应能力强，能够在快节奏的工作环境中保持高效。",
    "培训经历：参加公司组织的管理能力提升培训并顺利结业。",
    "语言能力：普通话标准，英语可作为工作语言进行日常沟通。",
    "自我评价：工作认真负责，善于沟通，具有较强的学习能力和团队协作精神。",
    "熟练使用各类办公软件，具备良好的文字表达能力。",
    "在校期间多次获得奖学金，担任学生会干部，组织过多场校园活动。",
    "主导完成多个重点项目，项目按期交付率保持在百分之九十五以上。",
    "业余爱好：阅读、跑步、摄影。",
    "持有相关职业资格证书，英语通过大学英语六级考试。",
    "求职意向：希望从事与专业相关的工作，期望在一线城市发展。",
    "参与制定部门工作流程规范，有效提升了团队的工作效率。",
    "具备跨部门协作经验，能够独立承担项目的需求分析与推进。",
    "到岗时间：一个月内。",
    "曾参与公司年度培训课程的设计与讲授，获得同事好评。",
]


def job_ad(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    employer, client = company(fake, rng), company(fake, rng)
    position = rng.choice(POSITIONS)
    low = rng.randrange(5, 30)
    salary = rng.choice(
        [f"{low}-{low + rng.randrange(3, 20)}K", f"{low}k-{low + 10}k·13薪", f"{low * 1000}-{low * 1500}元/月"]
    )
    b.text("【招聘】").value("公司名称", employer).text("诚聘").value("职位名称", position).text("\n")
    if rng.random() < 0.4:
        nickname = employer[:4]
        b.text("公司简介：").mention(employer).text("（以下简称“").mention(nickname).text("”）成立于")
        b.text(f"{rng.randrange(1995, 2022)}年，是一家专注于{fake.company_suffix()[:2]}领域的企业。")
    b.pad_to(b.length + target // 2, JOB_FILLER[:6], rng)
    if rng.random() < 0.5:
        b.text("\n我们的服务客户包括").mention(client).text("等知名企业。")
    if rng.random() >= MISSING:
        degree = rng.choice(DEGREES)
        b.text("\n任职要求：").value("学历要求", rng.choice([f"{degree}及以上学历", f"{degree}以上"])).text("。")
    if rng.random() >= MISSING:
        b.text("\n薪资待遇：").value("薪资范围", salary).text("，另有绩效奖金。")
    b.text("\n工作地点：").value("工作地点", city(fake)).text(f"{fake.district()}区")
    b.pad_to(target - 40, JOB_FILLER[6:], rng)
    if rng.random() >= MISSING:
        b.text("\n联系电话：").value("联系电话", phone(rng, fake.phone_number()))
        b.text(f"（{fake.last_name()}{rng.choice(['先生', '女士'])}）")
    b.text("\n")


def resume(fake: Faker, rng: random.Random, b: DocumentBuilder, target: int) -> None:
    current, former = company(fake, rng), company(fake, rng)
    born = day_between(rng, date(1970, 1, 1), date(2002, 12, 31))
    b.text("个人简历\n姓名：").value("姓名", fake.name())
    if rng.random() >= MISSING:
        b.text("    性别：").value("性别", rng.choice(["男", "女"]))
    if rng.random() >= MISSING:
        b.text("    出生日期：").value("出生日期", date_text(rng, born))
    b.text("\n学历：").value("学历", rng.choice(DEGREES)).text("    毕业院校：").value("毕业院校", rng.choice(SCHOOLS))
    b.text("\n手机：").value("手机号码", phone(rng, fake.phone_number()))
    if rng.random() >= MISSING:
        b.text("    邮箱：").value("电子邮箱", fake.free_email())
    b.text(f"\n现居住地：{fake.address()}\n" if target else "\n")
    b.pad_to(b.length + target // 3, RESUME_FILLER[:5], rng)
    start = rng.randrange(born.year + 22, 2025)
    b.text(f"\n工作经历：\n{full_width(str(start)) if rng.random() < 0.2 else start}年至今  ")
    b.value("工作单位", current).text(f"  {rng.choice(POSITIONS)}\n")
    if rng.random() < 0.6:
        b.text(f"{start - rng.randrange(2, 6)}年-{start}年  ").mention(former).text(f"  {rng.choice(POSITIONS)}\n")
    b.pad_to(target, RESUME_FILLER[5:], rng)
