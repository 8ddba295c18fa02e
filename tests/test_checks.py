"""The gate's cross-checks on real text: the hand-written free-phrasing corpus and its ground truth."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from model.answers.checks import boundary_problem, document_reasons, name_like, typed_mentions
from model.values.dates import parse_date
from model.values.lexicon import person_ok
from model.values.mentions import mentions
from model.values.normalize import normal_form
from ops.eval.accuracy import read_corpus
from schemas.messages import Document, ReviewCode, Span

FREEFORM = Path(__file__).resolve().parent.parent / "ops" / "corpus" / "freeform.jsonl"


@pytest.fixture(scope="module")
def corpus() -> tuple[dict[str, Document], dict]:
    docs, truth, _ = read_corpus(FREEFORM)
    return {d.doc_id: d for d in docs}, truth


def name_values(corpus):
    docs, truth = corpus
    for doc_id, doc in docs.items():
        for label, values in truth[doc_id].items():
            if name_like(doc, label):
                yield from ((doc, label, value) for value in values)


def test_every_true_name_of_the_free_phrasing_corpus_passes(corpus) -> None:
    checked = list(name_values(corpus))
    assert len(checked) > 100
    flagged = [(doc.doc_id, label, value) for doc, label, value in checked if boundary_problem(doc, label, value)]
    assert flagged == []


def test_names_cut_inside_a_word_are_flagged(corpus) -> None:
    """Cuts of the true names that are not words themselves: the last or first character off."""
    caught = total = 0
    for doc, label, value in name_values(corpus):
        for cut in (value[:-1], value[1:]):
            if len(cut) >= 2 and cut not in ("有限公", "有限公司") and doc.text.count(cut) == doc.text.count(value):
                total += 1
                caught += boundary_problem(doc, label, cut) is not None
    # Measured: 211 of 212; 维塔科技 of 阿维塔科技 is a word of its own to jieba.
    assert total > 200 and caught / total > 0.99


@pytest.mark.parametrize(
    ("doc_id", "label", "cut"),
    [
        ("freeform-contract-01", "乙方", "周"),  # only the surname of 周晓梅
        ("freeform-contract-03", "乙方", "林雨"),  # 林雨桐 without its last character
        ("freeform-resume-02", "姓名", "罗文"),  # jieba: 罗文/斌, the 斌 left off
        ("freeform-resume-02", "姓名", "文斌"),  # the surname left off
        ("freeform-contract-01", "甲方", "州云栖数智科技有限公司"),  # a company cut inside its city, 杭州
        ("freeform-contract-02", "甲方", "成都"),  # a word, but the head of 成都锦江物流股份有限公司
    ],
)
def test_known_truncations_are_flagged_and_say_where(corpus, doc_id: str, label: str, cut: str) -> None:
    docs, truth = corpus
    doc = docs[doc_id]
    assert boundary_problem(doc, label, cut) is not None
    assert boundary_problem(doc, label, truth[doc_id][label][0]) is None


def test_a_value_of_a_label_that_holds_no_name_is_not_segmented(corpus) -> None:
    docs, _ = corpus
    doc = docs["freeform-contract-01"]
    assert not name_like(doc, "合同金额") and boundary_problem(doc, "合同金额", "二十四万") is None


def spans(doc: Document, values: dict[str, list[str]]) -> dict[str, list[Span]]:
    def span(text: str) -> Span:
        start = doc.text.find(text)
        return Span(text=text, start=start, end=start + len(text), confidence=1.0, margin=1.0)

    return {label: [span(v) for v in values.get(label, [])] for label in doc.labels}


def test_phone_and_email_that_no_label_took_send_the_record_to_review(corpus) -> None:
    docs, truth = corpus
    doc = docs["freeform-resume-05"]
    assert mentions(doc.text)["phone"] == ("18623012345",)
    assert mentions(doc.text)["email"] == ("tiantian.design@gmail.com",)
    right = {label: list(values) for label, values in truth[doc.doc_id].items()}
    assert document_reasons(doc, spans(doc, right)) == []
    missed = {**right, "手机号码": [], "电子邮箱": [], "姓名": []}
    reasons = document_reasons(doc, spans(doc, missed))
    assert [(r.code, r.label, r.value) for r in reasons] == [
        (ReviewCode.UNCLAIMED_VALUE, "姓名", "田甜"),
        (ReviewCode.UNCLAIMED_VALUE, "手机号码", "18623012345"),
        (ReviewCode.UNCLAIMED_VALUE, "电子邮箱", "tiantian.design@gmail.com"),
    ]


def test_a_mention_taken_by_another_label_is_claimed(corpus) -> None:
    """The model put the date under another label: no label of type date is empty-handed for it."""
    docs, truth = corpus
    doc = docs["freeform-contract-01"]
    values = {label: list(vs) for label, vs in truth[doc.doc_id].items()}
    values["签约日期"], values["合同期限"] = [], ["2023年3月15日"]
    assert document_reasons(doc, spans(doc, values)) == []


def test_spaced_phone_and_chinese_date_and_amount_are_mentions(corpus) -> None:
    docs, _ = corpus
    assert typed_mentions(docs["freeform-medical-05"].text)["person"] == ("冯德胜", "邓晓川")
    assert typed_mentions(docs["freeform-medical-09"].text)["organisation"] == ("南京鼓楼医院",)
    assert mentions(docs["freeform-resume-02"].text)["phone"] == ("138 0451 2345",)
    assert mentions(docs["freeform-contract-01"].text)["amount"] == ("人民币二十四万元",)
    assert "二〇二二年十月八日" in mentions(docs["freeform-contract-03"].text)["date"]


@pytest.mark.parametrize(
    ("kind", "text", "mention", "normal"),
    [
        # The mixed corpus's OCR breaks: a space or a line inside a phone, a date or after an e-mail's @.
        ("phone", "想来的朋友打 020-3889 1456 找人事小何", "020-3889 1456", "+86-20-38891456"),
        ("phone", "联系人：钱女士 0519 - 8699 2317\n地址", "0519 - 8699 2317", "+86-519-86992317"),
        ("phone", "手机：１３９－１０２８－６６７３    邮箱", "１３９－１０２８－６６７３", "+8613910286673"),
        ("date", "签署日：2023年 7月 1日", "2023年 7月 1日", "2023-07-01"),
        ("date", "（记者 古 丽 娜）2023年\n5月18日，喀什", "2023年\n5月18日", "2023-05-18"),
        ("email", "邮箱：zheng.xiaotong@\nqq.com\n学校", "zheng.xiaotong@\nqq.com", "zheng.xiaotong@qq.com"),
        # Another country's phone with its code; a date in financial numerals.
        ("phone", "London office: +44 20 7946 0958 (ext. none)", "+44 20 7946 0958", "+442079460958"),
        ("phone", "WhatsApp ＋65 9012-3456，随时联系", "＋65 9012-3456", "+6590123456"),
        ("date", "签订时间：贰零贰叁年拾壹月伍日\n", "贰零贰叁年拾壹月伍日", "2023-11-05"),
    ],
)
def test_typed_values_as_written_are_mentions_and_read_whole(kind, text, mention, normal) -> None:
    assert mentions(text)[kind] == (mention,)
    assert normal_form(kind, mention).value == normal


def test_a_year_after_a_plus_is_no_phone() -> None:
    assert mentions("营收同比+25 2024年")["phone"] == ()


def test_mixed_script_names_are_persons_and_mentions() -> None:
    assert all(person_ok(v) for v in ("Kevin 刘", "Emily Chen 陈怡", "欧阳 Vincent", "张伟", "John Smith"))
    assert not any(person_ok(v) for v in ("Android开发", "SLAM算法", "Java后端", "Tony"))
    assert mentions("方（乙方）：Kevin 刘，身份证号码")["person"] == ("Kevin 刘",)
    assert mentions("乙方是Jessica 黄本人吧")["person"] == ("Jessica 黄本人", "Jessica 黄本", "Jessica 黄")
    assert mentions("开放职位：Android开发工程师、iOS开发工程师")["person"] == ()


def test_salaries_are_mentions_with_and_without_their_word_of_pay() -> None:
    assert mentions("月薪8000-12000元，联系电话0592-5551234")["salary"] == ("月薪8000-12000元", "8000-12000元")
    assert mentions("地点北京海淀\n【薪资】30-50K·15薪\n")["salary"] == ("30-50K·15薪",)
    assert mentions("月薪八千到一万二，包吃住")["salary"] == ("月薪八千到一万二", "八千到一万二")
    assert mentions("💰月薪5500起\n")["salary"] == ("月薪5500起", "5500起")
    assert mentions("区号0592-5551234，2023-2024年度")["salary"] == ()


def test_a_substantial_document_answered_with_nothing_is_reviewed(corpus) -> None:
    docs, _ = corpus
    doc = docs["freeform-job_ad-01"]

    def codes(values: dict[str, list[str]]) -> list[ReviewCode]:
        return [r.code for r in document_reasons(doc, spans(doc, values))]

    [empty] = [r for r in document_reasons(doc, spans(doc, {})) if r.code is ReviewCode.EMPTY_RECORD]
    assert "0 of 6" in empty.detail
    one = {
        "联系电话": ["0592-5551234"],
        "公司名称": ["厦门鹭岛餐饮管理有限公司"],
        "学历要求": ["大专以上学历"],
        "薪资范围": ["8000-12000元"],
    }
    # The company and the salary (typed mentions) and the degree (a cue) unclaimed, and the record near-empty.
    unclaimed = [ReviewCode.UNCLAIMED_VALUE] * 3
    assert codes({"联系电话": one["联系电话"]}) == [*unclaimed, ReviewCode.EMPTY_RECORD]
    assert codes(one) == []  # four of six labels answered: no longer near-empty


def test_a_short_document_with_nothing_to_find_is_not_an_empty_record(corpus) -> None:
    docs, _ = corpus
    short = msgspec.structs.replace(docs["freeform-job_ad-01"], text="招聘启事：详情面议。")
    assert document_reasons(short, spans(short, {})) == []
    classify = msgspec.structs.replace(docs["freeform-job_ad-01"], task="classify")
    assert document_reasons(classify, {}) == []


def test_a_contract_party_left_none_beside_an_unclaimed_name_is_reviewed(corpus) -> None:
    """The demo model's answer to freeform-contract-01: both parties None, every other label right."""
    docs, truth = corpus
    doc = docs["freeform-contract-01"]
    answered = {**{label: list(values) for label, values in truth[doc.doc_id].items()}, "甲方": [], "乙方": []}
    reasons = document_reasons(doc, spans(doc, answered))
    assert [(r.code, r.label) for r in reasons] == [
        (ReviewCode.UNCLAIMED_VALUE, "甲方"),
        (ReviewCode.UNCLAIMED_VALUE, "乙方"),
    ]
    assert [r.value for r in reasons] == ["周晓梅", "周晓梅"]  # 云栖, jieba's nr, is the company's word
    # A doctor's name jieba splits as 潘/nr 建华/nz is still a person's name in the text.
    assert "潘建华" in typed_mentions(docs["freeform-medical-08"].text)["person"]


def test_english_dates_are_mentions() -> None:
    text = "Reuters — June 12, 2025 — BYD. Seen on 28 February 2026. Junes 12, 2025 is none."
    assert mentions(text)["date"] == ("June 12, 2025", "28 February 2026")
    deed = "Signed on the fifth day of March, 2025 at Jinjiang. Dated the Twenty-First Day of June 2024."
    assert mentions(deed)["date"] == ("the fifth day of March, 2025", "the Twenty-First Day of June 2024")
    assert [parse_date(d) for d in mentions(deed)["date"]] == [("2025-03-05", None), ("2024-06-21", None)]
