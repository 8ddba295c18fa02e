"""The lexicon backoff: LAC's entities as candidates the model chooses among, for the review record."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from model.answers.backoff import Backoff
from model.answers.candidates import degree_rank, extend_cut_values, in_role, offered, whole_name
from model.answers.checks import claimed, document_reasons, taken_values, unclaimed_entities
from model.answers.parties import nameless_parties
from model.answers.validate import Extraction
from model.answers.vouch import vouched
from model.build import build_engine
from model.runner.attention import make_attention
from model.runner.bloom import Bloom
from model.runner.score import BloomScorer, groups
from model.values.addresses import address_end
from model.values.cues import in_vocabulary
from model.values.entities import Entity, EntityFinder, _one_line, english_names, finder, read_user_dictionary
from model.values.field_types import matches
from model.values.mentions import mentions
from model.values.width import han_squeezed
from schemas.decode import decode_document
from schemas.messages import Candidate, Processing, ReviewCode, ReviewReason, ReviewRecord, Span, TextWindow
from streams.flow.routing import route_extraction
from streams.settings import load_settings

PROCESSING = (
    b'{"worker_id":"w","source_topic":"raw","partition":0,"offset":1,"received_at":"2026-12-02T00:00:00Z",'
    b'"completed_at":"2026-12-02T00:00:01Z","batch_size":1,"timings":{}}'
)


def _doc(text: str, field_set: str, doc_id: str = "d"):
    raw = {"doc_id": doc_id, "text": text, "field_set": field_set}
    return decode_document(json.dumps(raw, ensure_ascii=False).encode(), 1 << 20)


def _scorer(model, rows: int = 16) -> BloomScorer:
    """The product's scorer (model/build.py) over the tiny model's weights, on the CPU's backend."""
    return BloomScorer(Bloom.from_transformers(model), make_attention("eager"), heads_first=True, rows=rows)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, tokenizer


def test_scorer_matches_one_forward_per_answer(tiny) -> None:
    model, tokenizer = tiny
    text = "输入: 接诊医生李秀英为患者王建国看诊，就诊日期2024年5月6日，医院为北京协和医院。\n抽取: "
    # One document's one-label prompts (sharing the text: one prefix pass, rows of three on its
    # cache), then prompts that share nothing.
    pairs = [
        (tokenizer(f"{text}{label}\n输出: [GEN]")["input_ids"], tokenizer(f"{label}: {value}")["input_ids"])
        for label in ("患者姓名", "主治医师")
        for value in ("李秀英", "王建国")
    ] + [
        (tokenizer("输入: 张三在北京工作\n抽取: 姓名\n输出: [GEN]")["input_ids"], tokenizer("姓名: 张三")["input_ids"]),
        (tokenizer("输入: 短\n抽取: 地点\n输出: [GEN]")["input_ids"], tokenizer("地点: 北京市朝阳区")["input_ids"]),
        (tokenizer("输入: 李四\n抽取: 姓名\n输出: [GEN]")["input_ids"], tokenizer("姓名: 李四")["input_ids"]),
    ]
    assert groups([context for context, _ in pairs], BloomScorer.MIN_SHARED)[0] == [0, 1, 2, 3]
    scorer = _scorer(model, rows=3)
    batched = scorer(pairs)
    # Whatever else is scored beside it, in whichever call: the same score, to the bit.
    assert [scorer([pair])[0] for pair in pairs] == batched
    # Each answer read alone by transformers' own forward: an implementation the scorer shares nothing with.
    for (context, answer), score in zip(pairs, batched, strict=True):
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([context + answer])).logits[0].float()
        logprobs = torch.log_softmax(logits, -1)
        alone = sum(float(logprobs[len(context) + k - 1, t]) for k, t in enumerate(answer))
        assert score == pytest.approx(alone, abs=1e-3)


def test_a_place_label_answered_none_beside_a_lac_location_is_unclaimed() -> None:
    doc = _doc("经双方协商，杭州云栖数智科技有限公司聘用周晓梅，本协议于2023年3月15日在杭州市签署。", "contract")
    fields = {"甲方": [Span(text="杭州云栖数智科技有限公司", start=6, end=18, confidence=0.99, margin=0.9)]}
    reasons = unclaimed_entities(doc, fields, finder()(doc.text), [])
    by_label = {r.label: r for r in reasons}
    assert by_label["签约地点"].code == ReviewCode.UNCLAIMED_VALUE and by_label["签约地点"].value == "杭州市"
    assert by_label["乙方"].value == "周晓梅"
    # The organisation is claimed by 甲方: no label is flagged for it.
    assert "甲方" not in by_label and not any(r.value == "杭州云栖数智科技有限公司" for r in reasons)


def test_review_record_carries_the_candidates_for_a_none_beside_named_entities(tiny, engine_settings) -> None:
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    doc = _doc("接诊医生李秀英为患者王建国看诊，家属张伟陪同，就诊日期2024年5月6日，医院为北京协和医院。", "medical")
    # The model's record: the hospital and date answered, both persons answered None.
    extraction = Extraction(
        doc_id="d",
        windows=[TextWindow(start=0, end=len(doc.text))],
        fields={
            "医院名称": [_span(doc.text, "北京协和医院")],
            "就诊日期": [_span(doc.text, "2024年5月6日")],
        },
    )
    cost = backoff([doc], [extraction])
    # The doctor (接诊医生李秀英) is offered as the doctor alone; the patient's label gets the others.
    # Only the patient's two are scored: a lone candidate's share is 1 whatever its score.
    assert cost.lexicon_documents == 1 and cost.labels == 2 and cost.candidates == 2
    assert [c.score for c in extraction.candidates["主治医师"]] == [1.0]
    for label, people in (("患者姓名", {"王建国", "张伟"}), ("主治医师", {"李秀英"})):
        candidates = extraction.candidates[label]
        assert {c.text for c in candidates} == people
        assert all(c.source == "lac:PER" and doc.text[c.start : c.end] == c.text for c in candidates)
        assert sum(c.score for c in candidates) == pytest.approx(1.0)
        assert [c.picked for c in candidates] == [True] + [False] * (len(people) - 1)
        assert candidates[0].score == max(c.score for c in candidates)
        # The pick is the label's value in the review record, with its reason.
        assert extraction.fields[label][0].text == candidates[0].text
        assert any(r.code == ReviewCode.LEXICON_BACKOFF and r.label == label for r in extraction.reasons)
    settings = load_settings({})
    processing = msgspec.json.decode(PROCESSING, type=Processing)
    engine_info = build_engine(engine_settings).info
    [review] = route_extraction(doc, extraction, engine_info, processing, settings.topics)
    assert review.topic == settings.topics.review
    record = msgspec.json.decode(review.value, type=ReviewRecord)
    assert record.candidates == extraction.candidates
    # Same input, same candidates and scores.
    answered = {k: v for k, v in extraction.fields.items() if k in ("医院名称", "就诊日期")}
    again = Extraction(doc_id="d", windows=extraction.windows, fields=answered)
    backoff([doc], [again])
    assert again.candidates == extraction.candidates


def test_no_backoff_where_every_label_is_answered_or_nothing_is_offered(tiny) -> None:
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    doc = _doc("诊断：感冒。", "medical")
    extraction = Extraction(doc_id="d", windows=[TextWindow(start=0, end=len(doc.text))])
    cost = backoff([doc], [extraction])
    assert cost.labels == 0 and extraction.candidates == {} and extraction.reasons == []


def test_user_dictionary_makes_a_company_lac_splits_one_entity(tmp_path: Path) -> None:
    text = "本合同由恒信精密机械（苏州）有限公司与员工签订。"
    assert "恒信精密机械（苏州）有限公司" not in [e.text for e in finder()(text)]
    words = tmp_path / "companies.txt"
    words.write_text("# our customers\n恒信精密机械（苏州）有限公司\n李秀英 PER\n", encoding="utf-8")
    assert read_user_dictionary(words) == (("恒信精密机械（苏州）有限公司", "ORG"), ("李秀英", "PER"))
    settings = load_settings({"SEQSTREAM_MODEL__USER_DICTIONARY": str(words)})
    assert settings.model.user_dictionary == str(words)
    found = finder(settings.model.user_dictionary)(text)
    org = [e for e in found if e.tag == "ORG"]
    assert [(e.text, e.start, e.end) for e in org] == [("恒信精密机械（苏州）有限公司", 4, 18)]
    # LAC's own pieces inside it (its 苏州 LOC) gave way.
    assert not any(e.start >= 4 and e.end <= 18 and e.tag != "ORG" for e in found)
    doc = _doc(text, "contract")
    assert next(c.text for c in offered(doc, "甲方", found, [])) == "恒信精密机械（苏州）有限公司"


def test_a_bad_user_dictionary_line_is_named(tmp_path: Path) -> None:
    words = tmp_path / "bad.txt"
    words.write_text("恒信 COMPANY\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:1"):
        EntityFinder(read_user_dictionary(words))


def test_a_place_in_an_address_claims_no_label() -> None:
    text = "甲方：太原明腾科技有限公司\n地址：广西壮族自治区杭州县沈北新刘街H座\n乙方：李秀珍\n公司"
    doc = _doc(text, "contract")
    fields = {
        "甲方": [Span(text="太原明腾科技有限公司", start=3, end=13, confidence=0.99, margin=0.9)],
        "乙方": [Span(text="李秀珍", start=38, end=41, confidence=0.99, margin=0.9)],
    }
    entities = finder()(text)
    assert any(e.tag == "LOC" for e in entities)
    # The places are the party's address, not where the contract was signed.
    assert unclaimed_entities(doc, fields, entities, []) == []
    # Written as where it was signed, the same kind of place is unclaimed.
    signed = _doc(text + "，本合同于杭州市签订", "contract")
    [reason] = unclaimed_entities(signed, fields, finder()(signed.text), [])
    assert reason.label == "签约地点" and reason.value == "杭州市"


def _span(text: str, value: str) -> Span:
    start = text.index(value)
    return Span(text=value, start=start, end=start + len(value), confidence=0.99, margin=0.9)


def test_a_lone_phone_of_the_labels_type_is_vouched_for_and_goes_to_fields(tiny) -> None:
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    text = "张伟，男，本科毕业于浙江大学，现任职于杭州云栖数智科技有限公司，手机13812345678。"
    doc = _doc(text, "resume")
    answered = {
        label: [_span(text, v)]
        for label, v in {"姓名": "张伟", "性别": "男", "毕业院校": "浙江大学", "学历": "本科"}.items()
        if label in doc.labels
    }
    answered["工作单位"] = [_span(text, "杭州云栖数智科技有限公司")]
    extraction = Extraction(doc_id="d", windows=[TextWindow(start=0, end=len(text))], fields=answered)
    extraction.reasons += document_reasons(doc, extraction.fields)
    # The phone label answered None beside the text's one phone: the cross-check sends it to review.
    assert [(r.code, r.label) for r in extraction.reasons] == [(ReviewCode.UNCLAIMED_VALUE, "手机号码")]
    backoff([doc], [extraction])
    [pick] = extraction.candidates["手机号码"]
    assert (pick.text, pick.source, pick.picked) == ("13812345678", "phone", True)
    assert extraction.fields["手机号码"][0].text == "13812345678"
    # Vouched for: no backoff reason, and the cross-check's reason is answered.
    assert extraction.reasons == [] and not extraction.needs_review


def test_a_backoff_pick_the_check_rejects_goes_to_review(tiny) -> None:
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    # Two phones for one phone label: the model must choose, and its choice is not vouched for.
    text = "张伟，男，现任职于杭州云栖数智科技有限公司，办公电话0571-88881234，手机13812345678。"
    doc = _doc(text, "resume")
    fields = {"工作单位": [_span(text, "杭州云栖数智科技有限公司")]}
    extraction = Extraction(doc_id="d", windows=[TextWindow(start=0, end=len(text))], fields=fields)
    extraction.reasons += document_reasons(doc, extraction.fields)
    backoff([doc], [extraction])
    candidates = extraction.candidates["手机号码"]
    assert {c.text for c in candidates} == {"0571-88881234", "13812345678"}
    picked = next(c.text for c in candidates if c.picked)
    assert extraction.fields["手机号码"][0].text == picked
    assert any(r.code == ReviewCode.LEXICON_BACKOFF and r.label == "手机号码" for r in extraction.reasons)
    assert extraction.needs_review


def test_the_check_vouches_only_for_a_lone_typed_detector_value_of_the_labels_type() -> None:
    doc = _doc("签约日期2024年6月3日，合同金额人民币20万元。", "contract")

    def one(text: str, source: str) -> list[Candidate]:
        start = doc.text.find(text)
        return [Candidate(text=text, start=start, end=start + len(text), score=1.0, source=source, picked=True)]

    assert vouched(doc, "签约日期", one("2024年6月3日", "date"))
    # LAC's TIME is no typed detector; amounts are not vouched for (a currency or a figure's head
    # written before the detector's value was 1 wrong in 9 in the fit); nor is a value of another type.
    assert not vouched(doc, "签约日期", one("2024年6月3日", "lac:TIME"))
    assert not vouched(doc, "合同金额", one("人民币20万元", "amount"))
    assert not vouched(doc, "签约日期", one("人民币20万元", "date"))
    # Two candidates: the model chose, and its share vouches for nothing.
    assert not vouched(doc, "签约日期", [*one("2024年6月3日", "date"), *one("20万元", "date")])


def test_a_place_inside_a_company_name_does_not_claim_the_company() -> None:
    text = "厦门鹭岛餐饮管理有限公司招聘门店经理，工作地点厦门，联系电话0592-5551234。"
    doc = _doc(text, "job_ad")
    fields = {
        "工作地点": [_span(text, "厦门")],
        "联系电话": [_span(text, "0592-5551234")],
    }
    reasons = {r.label: r for r in document_reasons(doc, fields)}
    assert (
        reasons["公司名称"].code == ReviewCode.UNCLAIMED_VALUE
        and reasons["公司名称"].value == "厦门鹭岛餐饮管理有限公司"
    )
    # A value of the mention's own kind inside it still claims it.
    taken = taken_values(doc, {"公司名称": [_span(text, "管理有限公司")]})
    assert claimed("厦门鹭岛餐饮管理有限公司", "organisation", taken)
    assert not claimed("厦门鹭岛餐饮管理有限公司", "organisation", [("厦门", "place")])
    assert claimed("永安市）", "organisation", [("永安市", "place")])
    # A party's value that is the head of a company's name leaves the name unclaimed (cut short).
    assert not claimed("成都锦江物流股份有限公司", "party", [("成都", "party")])
    assert claimed("委托方成都锦江物流股份有限公司", "party", [("成都锦江物流股份有限公司", "party")])


def test_a_lone_value_offered_to_two_labels_is_vouched_for_neither(tiny) -> None:
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    text = "员工张伟入职手续已办妥，请致电13812345678确认。"
    raw = {"doc_id": "d", "text": text, "labels": ["本人电话", "紧急联系电话"]}
    raw["field_types"] = {"本人电话": "phone", "紧急联系电话": "phone"}
    doc = decode_document(json.dumps(raw, ensure_ascii=False).encode(), 1 << 20)
    extraction = Extraction(doc_id="d", windows=[TextWindow(start=0, end=len(text))])
    extraction.reasons += document_reasons(doc, extraction.fields)
    backoff([doc], [extraction])
    # The one phone is each label's only candidate, but it can be at most one's: both go to review.
    for label in ("本人电话", "紧急联系电话"):
        assert [(c.text, c.source) for c in extraction.candidates[label]] == [("13812345678", "phone")]
    backed_off = {r.label for r in extraction.reasons if r.code == ReviewCode.LEXICON_BACKOFF}
    assert backed_off == {"本人电话", "紧急联系电话"} and extraction.needs_review


def _cut_record(doc, values: dict[str, str]) -> Extraction:
    fields = {label: [_span(doc.text, value)] for label, value in values.items()}
    return Extraction(doc_id=doc.doc_id, windows=[TextWindow(start=0, end=len(doc.text))], fields=fields)


def test_a_value_the_text_continues_into_an_entity_of_its_type_is_extended_and_reviewed() -> None:
    doc = _doc("郑晓彤，2019年毕业于华南理工大学，本科。", "resume")
    at = doc.text.find("华南理工大学")
    extraction = _cut_record(doc, {"姓名": "郑晓彤", "毕业院校": "华南理工大"})
    extend_cut_values(doc, extraction, [Entity("ORG", at, at + 6, "华南理工大学")])
    assert [s.text for s in extraction.fields["毕业院校"]] == ["华南理工大学"]
    assert extraction.fields["毕业院校"][0].end == at + 6
    [reason] = extraction.reasons
    assert (reason.code, reason.label, reason.value) == (ReviewCode.VALUE_BOUNDARY, "毕业院校", "华南理工大学")
    assert "'华南理工大'" in reason.detail


def test_a_typed_value_is_extended_only_into_a_value_of_its_type() -> None:
    doc = _doc("患者韦秀兰，就诊日期2020年12月8日起复诊。", "medical")
    extraction = _cut_record(doc, {"就诊日期": "2020年12月"})
    at = doc.text.find("2020")
    # LAC's time runs on to 起; the date detector's mention stops at the day.
    extend_cut_values(doc, extraction, [Entity("TIME", at, at + 11, "2020年12月8日起")])
    [span] = extraction.fields["就诊日期"]
    assert span.text == "2020年12月8日" and span.normalised is not None


def test_no_extension_across_a_line_break_or_into_another_labels_value() -> None:
    doc = _doc("毕业院校：中欧国际工商学院\nCurrent: 上海浦江精细化工有限公司", "resume")
    at = doc.text.find("中欧")
    extraction = _cut_record(doc, {"毕业院校": "中欧国际工商学院"})
    extend_cut_values(doc, extraction, [Entity("ORG", at, at + 16, "中欧国际工商学院\nCurrent")])
    assert extraction.fields["毕业院校"][0].text == "中欧国际工商学院" and extraction.reasons == []
    party = _doc("说明：宋志远自愿加入青岛海蓝生物科技有限公司。", "contract")
    # The organisation detector's mention runs from 宋志远; the company in it is 甲方's value.
    assert mentions(party.text)["organisation"] == ("宋志远自愿加入青岛海蓝生物科技有限公司",)
    record = _cut_record(party, {"乙方": "宋志远", "甲方": "青岛海蓝生物科技有限公司"})
    extend_cut_values(party, record, [])
    assert record.fields["乙方"][0].text == "宋志远" and record.reasons == []


def test_a_company_name_ending_in_its_legal_form_is_whole() -> None:
    """A generated job ad: LAC's organisation ran on past the company into the title."""
    doc = _doc("【招聘】鸿睿思博传媒有限公司诚聘测试工程师\n公司简介：", "job_ad")
    at = doc.text.find("鸿睿")
    extraction = _cut_record(doc, {"公司名称": "鸿睿思博传媒有限公司"})
    extend_cut_values(doc, extraction, [Entity("ORG", at, at + 20, doc.text[at : at + 20])])
    assert extraction.fields["公司名称"][0].text == "鸿睿思博传媒有限公司" and extraction.reasons == []


def _candidate(text: str, value: str) -> Candidate:
    start = text.index(value)
    return Candidate(text=value, start=start, end=start + len(value), score=0.0, source="lac:ORG")


def test_candidates_out_of_the_labels_role_are_not_offered_where_others_fit() -> None:
    text = "2015年毕业于兰州大学，现就职于甘肃电投能源有限公司。接诊医生：林慧敏，患者付子轩。"
    orgs = [_candidate(text, "兰州大学"), _candidate(text, "甘肃电投能源有限公司")]
    assert [c.text for c in in_role(text, "工作单位", orgs)] == ["甘肃电投能源有限公司"]
    assert [c.text for c in in_role(text, "毕业院校", orgs)] == ["兰州大学"]
    people = [_candidate(text, "林慧敏"), _candidate(text, "付子轩")]
    assert [c.text for c in in_role(text, "患者姓名", people)] == ["付子轩"]
    assert [c.text for c in in_role(text, "主治医师", people)] == ["林慧敏"]
    # Where none fits, or all do, the role says nothing.
    assert in_role(text, "工作单位", orgs[:1]) == orgs[:1]
    assert in_role(text, "姓名", people) == people
    # A contract's first party, unkeyed: the organisation, not the person who wrote (刘倩 of its HR).
    offer = "HR刘倩：厦门鹭岛声学科技有限公司与沈卓然的合同已签。"
    parties = [_candidate(offer, "刘倩"), _candidate(offer, "厦门鹭岛声学科技有限公司"), _candidate(offer, "沈卓然")]
    assert [c.text for c in in_role(offer, "甲方", parties)] == ["厦门鹭岛声学科技有限公司"]
    assert in_role(offer, "乙方", parties) == parties


def test_a_label_answered_only_with_values_not_of_its_type_is_backed_off(tiny) -> None:
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    doc = _doc("个人简历\n姓名：郑晓彤\n毕业院校：华南理工大学\n手机：13812345678", "resume")
    mistyped = ReviewReason(code=ReviewCode.TYPE_MISMATCH, detail="not a person's name", label="姓名", value="简历")
    extraction = Extraction(
        doc_id="d",
        windows=[TextWindow(start=0, end=len(doc.text))],
        fields={"姓名": [_span(doc.text, "简历")], "手机号码": [_span(doc.text, "13812345678")]},
        reasons=[mistyped],
    )
    backoff([doc], [extraction])
    assert [c.text for c in extraction.candidates["姓名"]] == ["郑晓彤"]
    assert [s.text for s in extraction.fields["姓名"]] == ["郑晓彤"]
    [picked] = [r for r in extraction.reasons if r.code == ReviewCode.LEXICON_BACKOFF and r.label == "姓名"]
    assert "['简历'] (not of its type)" in picked.detail
    assert mistyped in extraction.reasons  # the model's own value stays named for the reviewer


def test_a_pick_inside_a_mixed_script_name_takes_the_whole_name() -> None:
    text = "个人简历\nName：Tony 林\n创始人Leo 蒋表示资金"
    offered_ = [_candidate(text, "Tony"), _candidate(text, "Leo")]
    people = [
        msgspec.structs.replace(_candidate(text, value), source="person")
        for value in ("Tony 林", "Leo 蒋表示", "Leo 蒋表", "Leo 蒋")
    ]
    candidates = [*offered_, *people]
    assert candidates[whole_name(candidates, 0)].text == "Tony 林"
    assert candidates[whole_name(candidates, 1)].text == "Leo 蒋"  # the shortest around it
    assert whole_name(candidates, 2) == 2  # a name itself stays
    lac_only = [_candidate(text, "Tony"), _candidate(text, "Tony 林")]  # LAC's, not the detector's
    assert whole_name(lac_only, 0) == 0


def test_a_place_runs_on_into_its_street_address_and_no_further() -> None:
    text = "本协议于二〇二五年一月二十日在苏州工业园区星湖街328号创意产业园2号楼1506室签署。"
    at = text.find("苏州")
    assert text[at : address_end(text, at)] == "苏州工业园区星湖街328号创意产业园2号楼1506室"
    # No house, building, floor or room number: a place, not an address.
    assert address_end("签订于北京市朝阳区，日期", 3) is None
    doc = _doc(text, "contract")
    extraction = _cut_record(doc, {"签约地点": "苏州"})
    extend_cut_values(doc, extraction, [])
    assert [s.text for s in extraction.fields["签约地点"]] == ["苏州工业园区星湖街328号创意产业园2号楼1506室"]
    assert [r.code for r in extraction.reasons] == [ReviewCode.VALUE_BOUNDARY]


def test_a_pick_of_a_part_of_a_date_or_an_address_takes_the_whole() -> None:
    text = "2023年\n5月18日，在广州市天河区华夏路10号富力中心32楼举办"
    date = msgspec.structs.replace(_candidate(text, "2023年\n5月18日"), source="date")
    assert whole_name([_candidate(text, "2023年"), date], 0) == 1
    address = msgspec.structs.replace(_candidate(text, "广州市天河区华夏路10号富力中心32楼"), source="address")
    assert whole_name([_candidate(text, "天河区"), address], 0) == 1


def test_a_party_answered_against_its_key_line_is_asked_again_offered_that_name(tiny) -> None:
    """mixed-contract-01: the shipped model swapped the parties the key lines name."""
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    text = "软件开发服务协议\n委托方（甲方）：苏州青羽智能科技有限公司\n受托方（乙方）：Kevin 刘，身份证号码见附件"
    doc = _doc(text, "contract")
    extraction = _cut_record(doc, {"甲方": "Kevin 刘", "乙方": "苏州青羽智能科技有限公司"})
    backoff([doc], [extraction])
    assert [s.text for s in extraction.fields["甲方"]] == ["苏州青羽智能科技有限公司"]
    assert [s.text for s in extraction.fields["乙方"]] == ["Kevin 刘"]
    assert [c.text for c in extraction.candidates["甲方"]] == ["苏州青羽智能科技有限公司"]
    said = [r for r in extraction.reasons if r.code == ReviewCode.UNCLAIMED_VALUE and r.label == "甲方"]
    assert len(said) == 1 and "['Kevin 刘']" in said[0].detail  # what the model said stays for the reviewer
    assert extraction.needs_review
    # Answered as the key line names it, nothing is asked again.
    right = _cut_record(doc, {"甲方": "苏州青羽智能科技有限公司", "乙方": "Kevin 刘"})
    backoff([doc], [right])
    assert right.candidates == {} and right.reasons == []


def test_a_place_written_again_as_the_head_of_an_address_is_extended_there() -> None:
    """mixed-contract-05: the model's 天津市 points at the party's name; the signing place's line
    writes it again as an address (a party's 地址 line is no signing place)."""
    text = (
        "采购人（甲方）：天津市河西区教育装备中心\n地址：天津市河西区友谊路35号城市大厦17层\n"
        "签订地点：天津市河西区友谊路35号城市大厦17层1702会议室\n"
    )
    doc = _doc(text, "contract")
    extraction = _cut_record(doc, {"签约地点": "天津市"})
    extend_cut_values(doc, extraction, [])
    [span] = extraction.fields["签约地点"]
    assert span.text == "天津市河西区友谊路35号城市大厦17层1702会议室"
    assert text[span.start : span.end] == span.text


def test_values_not_of_their_type_claim_no_candidate(tiny) -> None:
    """mixed-medical-03: 医院名称 answered 海 燕, no organisation, took the doctor 龙 海 燕 from 主治医师."""
    model, tokenizer = tiny
    backoff = Backoff(finder(), _scorer(model), tokenizer, 1024)
    doc = _doc("患者姓名：尹春华\n诊断：甲状腺结节\n医 生 ：龙 海 燕", "medical")
    extraction = _cut_record(doc, {"患者姓名": "尹春华", "医院名称": "海 燕"})
    extraction.reasons += [
        ReviewReason(code=ReviewCode.TYPE_MISMATCH, detail="not an organisation", label="医院名称", value="海 燕"),
        # As the real record had it: LAC's person 医 beside the doctor answered None.
        ReviewReason(code=ReviewCode.UNCLAIMED_VALUE, detail="LAC tags the person '医'", label="主治医师", value="医"),
    ]
    backoff([doc], [extraction])
    assert [s.text for s in extraction.fields["主治医师"]] == ["龙 海 燕"]


@pytest.mark.parametrize(
    ("tag", "text", "entity"),
    [
        ("ORG", "Partner\n臻锐资本", "臻锐资本"),  # a line's tail joined to the next line's head
        ("ORG", "中建八局第三建设有限公司\n成员", "中建八局第三建设有限公司"),
        ("LOC", "济南\n主办", "济南"),  # a tie: the first line
        ("PER", "│\n│", ""),  # no Chinese: no entity
        ("ORG", "江西工业职业技术学\n院", "江西工业职业技术学\n院"),  # a name OCR broke stays whole
    ],
)
def test_an_entity_lac_ran_over_a_line_break_is_one_lines(tag, text, entity) -> None:
    at, found = _one_line(tag, 10, text)
    assert found == entity and (not found or text[at - 10 :].startswith(found))


def test_latin_words_lac_tags_apart_are_one_name_and_one_character_is_none() -> None:
    text = "国际邮轮母港集团总裁Henrik Larsen与许文澜出席。受检者 Linda 卢，主检医师 方"
    people = [e.text for e in finder()(text) if e.tag == "PER"]
    assert "Henrik Larsen" in people and "Henrik" not in people
    doc = _doc(text, "medical")
    offered_names = [c.text for c in offered(doc, "患者姓名", finder()(text), [])]
    assert all(len(name) > 1 for name in offered_names) and "Linda 卢" in offered_names


def test_an_organisation_matched_in_two_runs_is_one_mention() -> None:
    # The pattern stops at the first suffix (大学); the part after it alone names nothing.
    found = mentions("主治医师：时雨辰     徐州医科大学附属医院")["organisation"]
    assert found == ("徐州医科大学", "徐州医科大学附属医院")
    text = "近日，内蒙古伊利实业集团股份有限公司与新西兰林肯大学签署"
    assert "股份有限公司" not in mentions(text)["organisation"]


@pytest.mark.parametrize(
    ("text", "value", "named"),
    [
        ("甲方：青岛海蓝生物科技有限公司\n关于本合同", "关于", False),  # a word of the dictionary, no name
        ("乙方：白露\n签约方：甲方与乙方", "方", False),  # one character
        ("乙方：沈卓然 2024年签", "2024", False),  # no letter
        ("由甲方和长沙星城餐饮管理有限公司签订", "和长沙", False),  # led by a function word
        ("乙方：白露\n", "白露", True),
        ("甲方：江苏苏电智慧能源有限公司", "江苏", True),  # cut short: extended, not replaced
    ],
)
def test_a_party_value_that_names_no_one_is_mistyped(text: str, value: str, named: bool) -> None:
    doc = _doc(text, "contract")
    extraction = _cut_record(doc, {"乙方": value})
    nameless_parties(doc, extraction)
    assert [r.code for r in extraction.reasons] == ([] if named else [ReviewCode.TYPE_MISMATCH])


def test_a_company_named_after_a_function_word_is_named() -> None:
    doc = _doc("甲方（用人单位）：同兴万点科技有限公司（以下简称“甲方”）", "contract")
    extraction = _cut_record(doc, {"甲方": "同兴万点科技有限公司"})
    nameless_parties(doc, extraction)
    assert extraction.reasons == []


@pytest.mark.parametrize(
    ("label", "value", "worded"),
    [
        ("学历", "华南理", False),
        ("学历", "中", False),
        ("学历", "本科及以上学历", True),
        ("学历要求", "学历不限", True),
        ("学历", "Bachelor's degree", True),
        ("性别", "女", True),
        ("性别", "女士", False),
        ("姓名", "中", True),
    ],
)
def test_a_closed_vocabularys_value_holds_one_of_its_words(label: str, value: str, worded: bool) -> None:
    assert in_vocabulary(label, value) is worded


@pytest.mark.parametrize(
    ("text", "squeezed"),
    [
        ("患 者 姓 名 ：尹 春 华", "患者姓名 ：尹春华"),  # letter-spaced throughout
        ("董事长许 文 澜在码头", "董事长许文澜在码头"),  # a name spaced inside a sentence
        ("姓名 韦秀 兰  性别 女", "姓名 韦秀兰  性别 女"),  # OCR's space in a name; a key's space stays
        ("病\u3000历\u3000首\u3000页", "病历首页"),
        ("海口讯 海南省商务厅", "海口讯 海南省商务厅"),  # between two words
        ("王小宝 男", "王小宝 男"),  # a sex after a name
        ("Henrik Larsen 与许文澜", "Henrik Larsen 与许文澜"),  # no Chinese character on one side
        ("就诊单位：昆明医科大学第二附\n属医院", "就诊单位：昆明医科大学第二附属医院"),  # OCR wrapped 附属
        ("签约方：市教育装备中心\n地址：昆明", "签约方：市教育装备中心\n地址：昆明"),  # a line's end
    ],
)
def test_spaces_inside_chinese_words_are_read_without(text: str, squeezed: str) -> None:
    out, at = han_squeezed(text)
    assert out == squeezed
    assert at == [] if out == text else [text[i] for i in at] == list(out)


def test_lac_reads_a_letter_spaced_name_whole_and_it_is_a_persons() -> None:
    text = "船长Henrik Larsen与集团董事长许 文 澜在码头互赠纪念品。姓名 韦秀 兰  性别 女"
    people = {e.text: (e.start, e.end) for e in finder()(text) if e.tag == "PER"}
    assert "许 文 澜" in people and "韦秀 兰" in people
    assert all(text[start:end] == name for name, (start, end) in people.items())
    assert matches("person", "许 文 澜") and not matches("person", "许 文 澜 男")


def test_a_name_cut_at_ocrs_space_and_a_spaced_date_are_extended() -> None:
    doc = _doc("姓名 韦秀 兰  性别 女\n就诊日期：2023 - 06 - 29", "medical")
    extraction = _cut_record(doc, {"患者姓名": "韦秀", "就诊日期": "2023"})
    extend_cut_values(doc, extraction, finder()(doc.text))
    assert [s.text for s in extraction.fields["患者姓名"]] == ["韦秀 兰"]
    assert [s.text for s in extraction.fields["就诊日期"]] == ["2023 - 06 - 29"]
    assert mentions("入院时间 2020年12月\n 8日\n门诊")["date"] == ("2020年12月\n 8日",)


def test_a_value_its_labels_type_refuses_claims_nothing() -> None:
    doc = _doc("医 生 ：龙 海 燕", "medical")
    taken = taken_values(doc, {"医院名称": [_span(doc.text, "海 燕")], "患者姓名": [_span(doc.text, "龙 海 燕")]})
    assert taken == [("龙 海 燕", "person")]


@pytest.mark.parametrize(
    ("text", "organisation"),
    [
        ("甲方那栏盖的是武汉光谷 Nova 生物医药有限公司的章", "武汉光谷 Nova 生物医药有限公司"),
        ("讯 —— 厦门 ＩＣＣ 国际邮轮母港集团迎来", "厦门 ＩＣＣ 国际邮轮母港集团"),
        ("Who we are: Finlytics Software Ltd., Shanghai office", "Finlytics Software Ltd."),
        ("Party A: Golden Lotus Trading (HK) Limited\nParty B", "Golden Lotus Trading (HK) Limited"),
        ("2014-2015  University of Edinburgh  MSc Finance", "University of Edinburgh"),
        ("Shenzhen Bluewave Robotics Co., Ltd. is", "Shenzhen Bluewave Robotics Co., Ltd."),
    ],
)
def test_mixed_script_and_english_organisations_are_mentioned_and_of_their_type(text, organisation) -> None:
    assert organisation in mentions(text)["organisation"]
    assert matches("organisation", organisation)


def test_no_english_organisation_without_its_kind_and_an_english_word_before_a_name_is_offered_without() -> None:
    assert mentions("We are a Group of friends; Shanghai office")["organisation"] == ()
    assert not matches("organisation", "Shanghai Office")
    assert mentions("Partner 臻锐资本集团")["organisation"] == ("Partner 臻锐资本集团", "臻锐资本集团")


def test_a_pick_that_begins_an_organisations_mention_takes_it_and_a_sum_is_no_organisation() -> None:
    text = "兹有苏州恒润精密机械有限公司。华芯 SemiTech 集团宣布完成人民币五亿元融资"
    organisations = [
        msgspec.structs.replace(_candidate(text, value), source="organisation")
        for value in ("兹有苏州恒润精密机械有限公司", "华芯 SemiTech 集团")
    ]
    candidates = [_candidate(text, "苏州恒润"), _candidate(text, "华芯"), *organisations]
    assert candidates[whole_name(candidates, 1)].text == "华芯 SemiTech 集团"
    assert whole_name(candidates, 0) == 0  # the mention ran on left of the name: not taken
    doc = _doc(text, "news")
    at = text.find("五亿元")
    offered_ = offered(doc, "组织机构", [Entity("ORG", at, at + 3, "五亿元")], [])
    assert "五亿元" not in [c.text for c in offered_]


def test_a_sum_whose_tail_the_model_took_is_extended_to_the_whole_sum() -> None:
    doc = _doc("年租金合计人民币叁拾\n陆万元整，押二付三。顾问费为税前美元肆万伍仟元整。", "contract")
    assert mentions(doc.text)["amount"] == ("人民币叁拾\n陆万元整", "美元肆万伍仟元整")
    extraction = _cut_record(doc, {"合同金额": "陆万元整"})
    extend_cut_values(doc, extraction, [])
    [span] = extraction.fields["合同金额"]
    assert (span.text, span.start) == ("人民币叁拾\n陆万元整", doc.text.find("人民币"))
    # A name is not widened to an organisation's mention around it: that may run on before the name.
    company = _doc("兹有苏州恒润精密机械有限公司委托", "contract")
    record = _cut_record(company, {"甲方": "苏州恒润精密机械有限公司"})
    extend_cut_values(company, record, [])
    assert record.fields["甲方"][0].text == "苏州恒润精密机械有限公司" and record.reasons == []


def test_a_name_after_an_english_title_is_a_persons_in_either_script() -> None:
    text = "To: Dr. Hannah Becker, Orthopaedics\nYours sincerely,\nDr. 任嘉和 (General Practitioner)。Dr. 王明来自北京"
    assert mentions(text)["person"] == ("Hannah Becker", "任嘉和")  # not 王明来: a name stands alone
    assert matches("person", "Anna Müller")
    assert mentions("Drs Hannah Becker; MrX 任嘉和 到了")["person"] == ()  # a title's dot is a dot


def test_a_kinship_word_lac_tags_a_person_is_not_offered_beside_names() -> None:
    doc = _doc("今天陪二叔去医院看病，病人闫大勇，翻译Leo, 七十二岁。", "medical")
    people = [
        Entity("PER", doc.text.find(name), doc.text.find(name) + len(name), name) for name in ("二叔", "闫大勇", "Leo")
    ]
    # A Latin given name alone stays: the model's pick of it takes a whole name where one is written.
    assert [c.text for c in offered(doc, "患者姓名", people, [])] == ["闫大勇", "Leo"]
    assert [c.text for c in offered(doc, "患者姓名", people[:1], [])] == ["二叔"]  # nothing else: it stays


def test_an_english_texts_proper_nouns_are_read_by_where_they_stand() -> None:
    news = (
        "Reuters — June 12, 2025 — BYD and Uber announced a partnership, Stella Li, executive vice president"
        " of BYD, said in Mexico City. Prices in RMB (APAC).\nSigned at Jinjiang, Fujian."
    )
    found = [(e.tag, e.text) for e in english_names(news)]
    assert found == [
        ("ORG", "BYD"),
        ("PER", "Stella Li"),
        ("ORG", "BYD"),
        ("LOC", "Mexico City"),
        ("LOC", "Jinjiang, Fujian"),
    ]  # no currency code, nothing in brackets, no line's or sentence's first word
    assert all(news[e.start : e.end] == e.text for e in english_names(news))
    # A text mostly in Chinese is LAC's alone.
    assert english_names("甲方：厦门鹭岛声学科技有限公司，乙方：沈卓然。Signed at Xiamen, Fujian.") == []


def test_a_transliterated_name_is_read_across_its_middle_dot() -> None:
    text = "本院医师努尔艾力·吐尔洪（男）参加了义诊"
    assert "努尔艾力·吐尔洪" in [e.text for e in finder()(text) if e.tag == "PER"]
    assert matches("person", "努尔艾力·吐尔洪") and not matches("person", "·吐尔洪")


def test_a_persons_degree_is_the_highest_named() -> None:
    assert [degree_rank(d) for d in ("博士研究生", "研究生学历", "本科", "大专", "Bachelor's degree", "学历")] == [
        0, 1, 2, 3, 2, None,
    ]  # fmt: skip
    doc = _doc("先后获得学士、硕士学位，2020年取得博士学位。", "resume")
    assert [c.text for c in offered(doc, "学历", [], [])] == ["博士学位", "博士"]  # each spelling of it


def test_an_address_written_in_english_is_offered_for_a_place() -> None:
    doc = _doc("Senior Analyst wanted\nOffice: Suite 5, 12 Queen's Road, Central, Hong Kong\nPay: HKD 40,000", "job_ad")
    assert [c.text for c in offered(doc, "工作地点", [], []) if c.source == "address"] == [
        "Suite 5, 12 Queen's Road, Central, Hong Kong"
    ]
