"""Closed-vocabulary labels' values found by their cues (model/values/cues.py), and the cross-check
that reads them: a degree, an age, a sex or a diagnosis the text writes beside its label answered None."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.answers.checks import document_reasons
from model.values.cues import CUED_LABELS, PATTERN_LABELS, cued_values
from ops.corpus import generate_corpus
from ops.eval.accuracy import read_corpus
from schemas.field_sets import FIELD_SETS
from schemas.messages import Document, ReviewCode, Span

CORPORA = Path(__file__).resolve().parent.parent / "ops" / "corpus"


def texts(text: str, label: str) -> list[str]:
    return [c.text for c in cued_values(text, label)]


def test_each_finding_offers_its_nested_spellings_longest_first() -> None:
    assert texts("要求本科及以上学历，年薪40万", "学历要求") == ["本科及以上学历", "本科及以上", "本科"]
    assert texts("学历：硕士研究生", "学历") == ["硕士研究生"]
    assert texts("患者王芳，女，67岁", "年龄") == ["67岁", "67"]
    assert texts("老人家八十三岁", "年龄") == ["八十三岁", "八十三"]


@pytest.mark.parametrize(
    ("text", "sex"),
    [
        ("性别：男", "男"),
        ("性  别 女\n", "女"),
        ("王小宝 男 5岁", "男"),
        ("本人许嘉怡，女，1996年生", "女"),
        ("段宏伟 | 男 | 出生", "男"),
    ],
)
def test_a_sex_after_its_key_beside_an_age_or_a_word_of_its_own(text: str, sex: str) -> None:
    assert texts(text, "性别") == [sex]


@pytest.mark.parametrize("text", ["男子篮球赛决赛", "妇女节活动", "她的子女都在外地", "男女平等"])
def test_a_sex_inside_a_word_is_no_value(text: str) -> None:
    assert texts(text, "性别") == []


def test_a_diagnosis_after_its_cue_up_to_the_clause_or_cell_end() -> None:
    assert texts("就诊，确诊为2型糖尿病，建议休息一周。", "诊断结果") == ["2型糖尿病"]
    assert texts("│临床诊断 │手足口病│", "诊断结果") == ["手足口病"]
    assert texts("印象：腰椎间盘突出症\n签名医师：", "诊断结果") == ["腰椎间盘突出症"]
    assert texts("主诉：咳嗽三天。", "诊断结果") == []


def test_a_job_title_after_its_key_or_a_verb_of_hiring_and_a_term_after_its_key() -> None:
    assert texts("【岗位】机器学习工程师\n【公司】", "职位名称") == ["机器学习工程师"]
    assert texts("某公司急需报关员两名，工作地点", "职位名称") == ["报关员"]
    assert texts("现诚聘执业律师一名", "职位名称") == ["执业律师"]
    # The notice is no job; 缺 hires only before a head count; a job after a bar or in English.
    assert texts("招聘启事\n某传媒有限公司现招聘短视频剪辑师2名。", "职位名称") == ["短视频剪辑师"]
    assert texts("我们眼镜厂缺质检员两个，活不累", "职位名称") == ["质检员"]
    assert texts("缺一不可，缺勤扣款", "职位名称") == []
    assert texts("连锁门店招聘｜烘焙 师\n", "职位名称") == ["烘焙 师"]
    liaison = "正在找一位Senior Medical Science Liaison，base 北京"
    assert texts(liaison, "职位名称") == ["Senior Medical Science Liaison"]
    assert texts("乙方受聘为甲方编辑，聘期一年，自2020年", "合同期限") == ["一年"]
    assert texts("劳动合同期限为3年，试用期", "合同期限") == ["3年"]
    assert texts("│ 合同期限   │ 三十六个月    │", "合同期限") == ["三十六个月"]
    # A term after its start, or written as its first and last day (OCR broke the second).
    assert texts("开发周期为自本协议生效起十八个月。", "合同期限") == ["十八个月"]
    assert texts("履约期：合同签订后九十日内交货", "合同期限") == ["九十日"]
    assert texts("本担保有效期至主债务履行完毕之日止。", "合同期限") == ["至主债务履行完毕之日止"]
    assert texts("The Supplier shall install the units within Forty-Five (45) days.", "合同期限") == [
        "Forty-Five (45) days"
    ]
    assert texts("实习期 ：2025年7月1日至2025年9\n月30日\n", "合同期限") == ["2025年7月1日至2025年9\n月30日"]
    # A probation is no contract term.
    assert texts("试用期三个月", "合同期限") == []


def test_a_news_event_led_by_its_verb_with_and_without_the_announcement() -> None:
    text = "某某网络有限公司今日宣布发布新一代智能物流平台。双方昨日签署战略合作协议，将共建实验室。"
    assert texts(text, "事件") == ["宣布发布新一代智能物流平台", "发布新一代智能物流平台", "签署战略合作协议"]
    # A clause OCR broke over a line goes on into the next line's short head.
    assert texts("在喀什古城举办首届\n丝路非遗市集，吸引游客逾三万人次。", "事件") == ["举办首届\n丝路非遗市集"]


def test_a_partys_name_on_its_key_line_less_a_gloss_closing_the_line() -> None:
    contract = (
        "委托方（甲方）：苏州青羽智能科技有限公司（Suzhou Qingyu Intelligent Technology Co., Ltd.）\n"
        "受托方（乙方）：Kevin 刘，身份证号码 32050219880614****\n"
    )
    assert (texts(contract, "甲方"), texts(contract, "乙方")) == (["苏州青羽智能科技有限公司"], ["Kevin 刘"])
    english = "Employer (甲方): Shenzhen Bluewave Robotics Co., Ltd.\nEmployee (乙方): 许嘉禾\n"
    assert (texts(english, "甲方"), texts(english, "乙方")) == (["Shenzhen Bluewave Robotics Co., Ltd."], ["许嘉禾"])
    assert texts("承租方（乙方）：Brightway Consulting (Shenzhen) Ltd.\n租赁物", "乙方") == [
        "Brightway Consulting (Shenzhen) Ltd."
    ]
    table = "│ 用人单位   │ 宁波甬港冷链仓储有限公司 │\n│ 劳动者     │ 钱佳怡           │"
    assert (texts(table, "甲方"), texts(table, "乙方")) == (["宁波甬港冷链仓储有限公司"], ["钱佳怡"])
    rows = "聘方|贵州黔味坊食品股份有限公司\n受聘方|罗文斌\n"  # 受聘方 is no 聘方
    assert (texts(rows, "甲方"), texts(rows, "乙方")) == (["贵州黔味坊食品股份有限公司"], ["罗文斌"])
    assert texts("出租方（甲方）：陈 德 胜\n", "甲方") == ["陈 德 胜"]
    # A party named in a clause has no key line, and a line broken inside a name names nobody.
    assert texts("乙方的年度工资为¥96,000.00，甲方每月15日前支付。", "甲方") == []
    assert texts("甲方（盖章）：太原晋阳重型装备制\n造有限公司", "甲方") == []


def test_a_label_with_no_cue_finds_nothing() -> None:
    assert texts("确诊为2型糖尿病，本科，男，45岁", "姓名") == []


def _spans(doc: Document, values) -> dict[str, list[Span]]:
    def span(text: str) -> Span:
        start = doc.text.find(text)
        return Span(text=text, start=start, end=start + len(text), confidence=1.0, margin=1.0)

    return {label: [span(v) for v in values.get(label, [])] for label in doc.labels}


def test_a_diagnosis_left_none_after_its_cue_sends_the_record_to_review() -> None:
    """The shipped model's record of freeform-medical-03 under the two-signal alarm: every value
    right but the diagnosis, answered None after 确诊为, and it went to fields."""
    docs, truth, _ = read_corpus(CORPORA / "freeform.jsonl")
    [doc] = [d for d in docs if d.doc_id == "freeform-medical-03"]
    right = {label: list(values) for label, values in truth[doc.doc_id].items()}
    assert document_reasons(doc, _spans(doc, right)) == []
    reasons = document_reasons(doc, _spans(doc, {**right, "诊断结果": []}))
    assert [(r.code, r.label, r.value) for r in reasons] == [(ReviewCode.UNCLAIMED_VALUE, "诊断结果", "2型糖尿病")]


@pytest.mark.parametrize("corpus", ["freeform", "layouts", "mixed", "generated"])
def test_true_records_raise_no_cue_reason_and_most_true_values_are_cued(corpus: str) -> None:
    """A record holding the true values is never flagged by the cues, on the hand-written corpora
    and on generated documents of every kind; and the cues find most of the values they are for."""
    if corpus == "generated":
        generated = list(generate_corpus(60, seed=2))
        docs = [
            Document(doc_id=g.doc_id, text=g.text, task="extract", labels=FIELD_SETS[g.kind], field_set=g.kind)
            for g in generated
        ]
        truth = {g.doc_id: g.values() for g in generated}
    else:
        docs, truth, _ = read_corpus(CORPORA / f"{corpus}.jsonl")
    cued = wanted = 0
    for doc in docs:
        values = {label: list(v) for label, v in truth[doc.doc_id].items()}
        reasons = document_reasons(doc, _spans(doc, values))
        assert not [r for r in reasons if r.label in CUED_LABELS], doc.doc_id
        for label in PATTERN_LABELS & set(doc.labels):
            if values.get(label):
                wanted += 1
                cued += bool(set(values[label]) & set(texts(doc.text, label)))
    # Measured: freeform 69/79, layouts 46/64, mixed 33/61, generated 326/338 (events of no verb: 通过…认定).
    assert wanted and cued / wanted >= 0.5, (cued, wanted)


def test_an_english_sex_and_age_in_a_list_of_their_own() -> None:
    text = "Re: Oliver 吴, male, 7 years\nSeen on 28 February 2026"
    assert (texts(text, "性别"), texts(text, "年龄")) == (["male"], ["7 years", "7"])
    # Years of experience are no age; a word inside another is no sex.
    assert texts("with 5 years of experience", "年龄") == []
    assert texts("Females and males, 12 teams", "性别") == []


def test_an_english_degree_and_a_title_after_an_english_verb_of_hiring() -> None:
    text = "We're hiring: Customer Success Manager (APAC)\nRequirements: Bachelor's degree; a master's degree or above"
    assert texts(text, "职位名称") == ["Customer Success Manager (APAC)"]
    assert texts(text, "学历要求") == ["Bachelor's degree", "master's degree or above", "master's degree"]
