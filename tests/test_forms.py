"""A form's keyed values (model/values/forms.py): key lines, cells, and a header row over its values."""

from __future__ import annotations

from model.values.forms import keyed_values


def values(text: str, label: str) -> list[str]:
    return [text[start:end] for start, end in keyed_values(text, label)]


def test_a_key_line_or_cell_gives_its_labels_value() -> None:
    news = "【快讯】2025-04-21 来源：新华网\n海口讯 海南省商务厅与中国南方航空当日签署航线合作备忘录"
    assert values(news, "发布机构") == ["新华网"]
    report = "┌──────┬─────┐\n│病人   │付子轩│\n│送检医生 │林慧敏│\n└──────┴─────┘"
    assert (values(report, "患者姓名"), values(report, "主治医师")) == (["付子轩"], ["林慧敏"])
    rows = "赛事|首届黄河马拉松鸣枪开跑\n城市|济南\n来源|齐鲁晚报"
    assert (values(rows, "事件"), values(rows, "地点"), values(rows, "发布机构")) == (
        ["首届黄河马拉松鸣枪开跑"],
        ["济南"],
        ["齐鲁晚报"],
    )
    # Several keys on one line, two spaces apart.
    assert values("姓名 贾秋菊  性别 女  年龄 67岁\n医师签名：易文韬", "主治医师") == ["易文韬"]


def test_a_header_row_over_a_row_of_values() -> None:
    table = "岗位名称\t招聘人数\t工作地点\t薪资\t学历\n数控车床操作工\t5\t佛山顺德\t7千-1万\t不限\n"
    assert values(table, "职位名称") == ["数控车床操作工"]
    assert values(table, "工作地点") == ["佛山顺德"]
    assert values(table, "学历要求") == ["不限"]


def test_a_keyed_value_reads_whole_and_of_its_type() -> None:
    # An English legal form after a comma, and a name OCR broke over a line, are the value's.
    assert values("Company: Moonlight Games (Xiamen) Co., Ltd.\nRole:", "公司名称") == [
        "Moonlight Games (Xiamen) Co., Ltd."
    ]
    text = "毕业院校|江西工业职业技术学\n院\n"
    assert values(text, "毕业院校") == ["江西工业职业技术学\n院"]
    # A closing gloss is not; nor a value that is another key, or not of the label's type.
    assert values("学历：本科及以上（材料、机械相关专业）\n", "学历要求") == ["本科及以上"]
    assert values("姓名|性别|学历|手机\n覃海波|男|大专|186 0213 9978", "姓名") == ["覃海波"]
    assert values("医生：请按时复诊", "主治医师") == []


def test_letter_spaced_and_english_keys() -> None:
    spaced = "患 者 姓 名 ：尹 春 华\n性 别 ：女     年 龄 ：4 1 岁\n医 生 ：龙 海 燕"
    assert values(spaced, "患者姓名") == ["尹 春 华"]
    assert (values(spaced, "性别"), values(spaced, "年龄")) == (["女"], ["4 1 岁"])
    assert values(spaced, "主治医师") == ["龙 海 燕"]
    # A letter-spaced title is no key before its value: only a colon or a bar makes one.
    assert values("诊 断 证 明 书\n兹证明", "诊断结果") == []
    english = (
        "Patient: Li Mingzhe\nSex: Male  Age: 45\nDiagnosis: acute appendicitis\nAttending physician: Dr. Wang Yue"
    )
    assert values(english, "患者姓名") == ["Li Mingzhe"]
    assert (values(english, "性别"), values(english, "年龄")) == (["Male"], ["45"])
    assert values(english, "诊断结果") == ["acute appendicitis"]
    assert values(english, "主治医师") == ["Wang Yue"]  # the title is no part of the name
