"""Values widened in a record that goes to review (model/values/lists.py, model/answers/widen.py):
the other items of a list the model answered one of, a job's place with its district, the cued value
the model's value begins."""

from __future__ import annotations

import json

from model.answers.validate import Extraction
from model.answers.widen import add_cued, add_districts, add_listed
from model.values.cues import cued_values
from model.values.entities import Entity
from model.values.lists import siblings
from schemas.decode import decode_document
from schemas.messages import ReviewCode, ReviewReason, Span, TextWindow


def _listed(text: str, value: str, names: list[str]) -> list[str]:
    spans = {(text.index(n), text.index(n) + len(n)) for n in names}

    def test(start: int, end: int, right: bool) -> tuple[int, int] | None:
        return (start, end) if (start, end) in spans else None

    start = text.index(value)
    return [text[a:b] for a, b in siblings(text, start, start + len(value), test)]


def test_a_lists_items_left_and_right_of_the_value() -> None:
    text = "签约方：中铁建工集团、西门子中国、雄安集团\n时间：2026年1月9日"
    assert _listed(text, "西门子中国", ["中铁建工集团", "西门子中国", "雄安集团"]) == ["中铁建工集团", "雄安集团"]
    # Slashes and spaces, a coordinating word, an arrow; a closing gloss is no part of an item.
    assert _listed("Base：杭州/上海 / 深圳\n", "上海", ["杭州", "深圳"]) == ["杭州", "深圳"]
    text = "先后就读于华东政法大学（法学学士）和香港城市大学（法学硕士，研究生学历）。"
    assert _listed(text, "香港城市大学", ["华东政法大学", "香港城市大学"]) == []  # 先后就读于… is no name
    assert _listed(text, "华东政法大学", ["华东政法大学", "香港城市大学"]) == ["香港城市大学"]
    text = "教育：南京航空航天大学（本）→ 中国科学院大学（博士）"
    assert _listed(text, "中国科学院大学", ["南京航空航天大学"]) == ["南京航空航天大学"]
    # Glossed items split by a semicolon (a résumé's employers with their years).
    text = "经历：中国商飞上海飞机设计研究院（2018-2022）；Airbus Beijing Engineering Centre（2022-今）\n"
    employers = ["中国商飞上海飞机设计研究院", "Airbus Beijing Engineering Centre"]
    assert _listed(text, employers[1], employers) == employers[:1]


def test_an_item_whose_name_another_continues_is_no_name_and_its_run_on_is() -> None:
    text = "门店：西安市雁塔区小寨东路126号；西安市未央区凤城八路与文景路十字东南角"
    doc = _doc(text, "job_ad")
    places = [*_entities(text, "LOC", ["西安市雁塔区小寨东路126号"]), Entity("LOC", 18, 21, "西安市")]
    places.append(Entity("LOC", 21, 24, "未央区"))
    assert text[18:24] == "西安市未央区"
    record = _record(doc, {"工作地点": "西安市雁塔区小寨东路126号"}, review=True)
    add_listed(doc, record, places)
    assert [s.text for s in record.fields["工作地点"]] == ["西安市雁塔区小寨东路126号"]  # not 西安市
    news = _doc("本轮由深创投领投，高瓴创投、中金资本跟投。", "news")
    record = _record(news, {"组织机构": "高瓴创投"}, review=True)
    add_listed(news, record, _entities(news.text, "ORG", ["高瓴创投", "中金资本"]))
    assert [s.text for s in record.fields["组织机构"]] == ["高瓴创投", "中金资本"]  # 跟投 is no name


def test_a_list_ends_at_a_clause_or_an_item_that_is_no_name() -> None:
    names = ["中铁建工集团", "雄安集团"]
    # The clause's comma ends the list: 雄安集团 is in another.
    assert _listed("中铁建工集团、中金资本，雄安集团出席", "中铁建工集团", [*names, "中金资本"]) == ["中金资本"]
    # An item that is no name ends the walk, even with names after it.
    assert _listed("中铁建工集团、某某、雄安集团", "中铁建工集团", names) == []


def test_an_english_name_among_listed_organisations_is_one_of_them() -> None:
    text = "合作方：华润置地、Standard Chartered、招商银行\n日期：2025年"
    doc = _doc(text, "news")
    record = _record(doc, {"组织机构": "华润置地"}, review=True)
    add_listed(doc, record, _entities(text, "ORG", ["华润置地", "招商银行"]))
    assert [s.text for s in record.fields["组织机构"]] == ["华润置地", "Standard Chartered", "招商银行"]
    text = "Lenovo and Nvidia unveiled a joint lab in Beijing on Monday"
    doc = _doc(text, "news")
    record = _record(doc, {"组织机构": "Lenovo"}, review=True)
    add_listed(doc, record, _entities(text, "ORG", ["Lenovo"]))
    assert [s.text for s in record.fields["组织机构"]] == ["Lenovo", "Nvidia"]  # its item runs on: the list ends
    text = "腾讯与Tesla Motors今日在上海签约"
    doc = _doc(text, "news")
    record = _record(doc, {"组织机构": "腾讯"}, review=True)
    add_listed(doc, record, _entities(text, "ORG", ["腾讯"]))
    assert [s.text for s in record.fields["组织机构"]] == ["腾讯", "Tesla Motors"]


def _doc(text: str, field_set: str):
    raw = {"doc_id": "d", "text": text, "field_set": field_set}
    return decode_document(json.dumps(raw, ensure_ascii=False).encode(), 1 << 20)


def _record(doc, values: dict[str, str], review: bool) -> Extraction:
    fields = {}
    for label, value in values.items():
        start = doc.text.index(value)
        fields[label] = [Span(text=value, start=start, end=start + len(value), confidence=0.99, margin=0.9)]
    reasons = [ReviewReason(code=ReviewCode.UNCLAIMED_VALUE, detail="open", label="事件")] if review else []
    return Extraction(doc_id="d", windows=[TextWindow(start=0, end=len(doc.text))], fields=fields, reasons=reasons)


def _entities(text: str, tag: str, names: list[str]) -> list[Entity]:
    return [Entity(tag, text.index(n), text.index(n) + len(n), n) for n in names]  # type: ignore[arg-type]


def test_a_record_in_review_gets_the_listed_organisations_of_a_label_that_takes_several() -> None:
    doc = _doc("项目签约｜雄安新区\n签约方：中铁建工集团、西门子（中国）有限公司、雄安集团\n内容：共建园区", "news")
    # LAC splits 西门子（中国）有限公司; the whole item reads as an organisation and is taken whole.
    entities = _entities(doc.text, "ORG", ["中铁建工集团", "西门子", "雄安集团"])
    extraction = _record(doc, {"组织机构": "中铁建工集团"}, review=True)
    add_listed(doc, extraction, entities)
    assert [s.text for s in extraction.fields["组织机构"]] == ["中铁建工集团", "西门子（中国）有限公司", "雄安集团"]
    added = [r for r in extraction.reasons if r.label == "组织机构"]
    assert [(r.code, r.value) for r in added] == [
        (ReviewCode.UNCLAIMED_VALUE, "西门子（中国）有限公司"),
        (ReviewCode.UNCLAIMED_VALUE, "雄安集团"),
    ]


def test_no_listed_values_bound_for_fields_for_a_single_value_label_or_claimed_by_another() -> None:
    doc = _doc("签约方：中铁建工集团、雄安集团", "news")
    entities = _entities(doc.text, "ORG", ["中铁建工集团", "雄安集团"])
    # A record bound for fields is left as the model gave it.
    bound = _record(doc, {"组织机构": "中铁建工集团"}, review=False)
    add_listed(doc, bound, entities)
    assert [s.text for s in bound.fields["组织机构"]] == ["中铁建工集团"] and bound.reasons == []
    # 发布机构 holds one value; and 组织机构 does not take the name 发布机构 answered.
    record = _record(doc, {"发布机构": "中铁建工集团", "组织机构": "雄安集团"}, review=True)
    add_listed(doc, record, entities)
    assert [s.text for s in record.fields["发布机构"]] == ["中铁建工集团"]
    assert [s.text for s in record.fields["组织机构"]] == ["雄安集团"]


def test_a_list_item_running_on_past_its_name_gives_the_name_and_no_latin_part() -> None:
    doc = _doc("本轮由深创投领投，高瓴创投、中金资本跟投。特邀Dr. Anna Müller与钟子墨担任导师。", "news")
    orgs = _entities(doc.text, "ORG", ["深创投", "高瓴创投", "中金资本"])
    people = _entities(doc.text, "PER", ["Müller", "钟子墨"])
    extraction = _record(doc, {"组织机构": "高瓴创投", "人物": "钟子墨"}, review=True)
    add_listed(doc, extraction, orgs + people)
    assert [s.text for s in extraction.fields["组织机构"]] == ["高瓴创投", "中金资本"]
    # Müller is a part of Anna Müller, whom LAC did not read whole: no value; the name after her title
    # (the person detector's) is, and the title is no part of it.
    assert [s.text for s in extraction.fields["人物"]] == ["钟子墨", "Anna Müller"]
    bare = _doc("本轮由深创投领投。特邀Anna Müller与钟子墨担任导师。", "news")
    record = _record(bare, {"人物": "钟子墨"}, review=True)
    add_listed(bare, record, _entities(bare.text, "PER", ["Müller", "钟子墨"]))
    assert [s.text for s in record.fields["人物"]] == ["钟子墨"]


def test_a_jobs_place_in_review_takes_the_district_the_text_writes_after_it() -> None:
    doc = _doc("厦门鹭岛餐饮管理有限公司招门店经理，工作在厦门思明区，月薪8000元。", "job_ad")
    places = _entities(doc.text, "LOC", ["思明区"])
    at = doc.text.index("厦门思明区")
    places.append(Entity("LOC", at, at + 2, "厦门"))
    # The model's span is the city's first occurrence, in the company's name.
    extraction = _record(doc, {"工作地点": "厦门"}, review=True)
    add_districts(doc, extraction, places)
    [span] = extraction.fields["工作地点"]
    assert (span.text, span.start) == ("厦门思明区", at)
    assert [(r.code, r.value) for r in extraction.reasons if r.label == "工作地点"] == [
        (ReviewCode.VALUE_BOUNDARY, "厦门思明区")
    ]
    # Not past a street, and not in a record bound for fields.
    street = _doc("办公地点：上海市静安区南京西路。", "job_ad")
    record = _record(street, {"工作地点": "上海市"}, review=True)
    add_districts(street, record, _entities(street.text, "LOC", ["上海市", "静安区", "南京西路"]))
    assert record.fields["工作地点"][0].text == "上海市静安区"
    bound = _record(doc, {"工作地点": "厦门"}, review=False)
    add_districts(doc, bound, places)
    assert bound.fields["工作地点"][0].text == "厦门" and bound.reasons == []


def test_a_value_in_review_takes_the_cued_value_it_begins_and_its_lists_other_items() -> None:
    text = "出院记录\n出院诊断：\n1. 高血压病3级（极高危）\n2. 冠状动脉粥样硬化性心脏病\n3. 高脂血症\n主治医师：时雨辰"
    doc = _doc(text, "medical")
    extraction = _record(doc, {"诊断结果": "高血压病3级"}, review=True)
    add_cued(doc, extraction)
    assert [s.text for s in extraction.fields["诊断结果"]] == [
        "高血压病3级（极高危）",
        "冠状动脉粥样硬化性心脏病",
        "高脂血症",
    ]
    codes = [(r.code, r.value) for r in extraction.reasons if r.label == "诊断结果"]
    assert codes[0] == (ReviewCode.VALUE_BOUNDARY, "高血压病3级（极高危）")
    # A closed vocabulary's spellings nest by design: 本科 stays 本科 beside 本科及以上学历.
    resume = _doc("学历：本科及以上学历", "resume")
    record = _record(resume, {"学历": "本科"}, review=True)
    add_cued(resume, record)
    assert record.fields["学历"][0].text == "本科"


def test_a_diagnosis_ocr_broke_inside_its_parentheses_reads_whole() -> None:
    text = "诊 断 ：甲状腺结节（TI-RADS 3\n类）\n医 生 ：龙 海 燕"
    assert [c.text for c in cued_values(text, "诊断结果")] == ["甲状腺结节（TI-RADS 3\n类）"]
    listed = cued_values("入院诊断：2型糖尿病；糖尿病肾病Ⅲ期\n", "诊断结果")
    assert [c.text for c in listed] == ["2型糖尿病", "糖尿病肾病Ⅲ期"]
