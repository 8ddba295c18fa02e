"""Named label sets that upstream systems may ask for instead of spelling out labels, and the value types of labels.

The labels are the Chinese field names SeqGPT is prompted with; BI reads them back as record keys,
so renaming one is a breaking change for the fields topic. `FieldType` lives here, not in `model`,
because the message contracts must not depend on the model package.
"""

from typing import Literal

FieldType = Literal["text", "phone", "id_card", "date", "amount", "salary", "email", "person", "organisation"]

# The names a raw document may give as `field_set`: a Literal, so the exported JSON Schema lists them.
FieldSetName = Literal["contract", "resume", "job_ad", "news", "medical"]

FIELD_SETS: dict[FieldSetName, tuple[str, ...]] = {
    "contract": ("甲方", "乙方", "签约日期", "合同金额", "合同期限", "签约地点"),
    "resume": ("姓名", "性别", "出生日期", "手机号码", "电子邮箱", "毕业院校", "学历", "工作单位"),
    "job_ad": ("公司名称", "职位名称", "工作地点", "薪资范围", "学历要求", "联系电话"),
    "news": ("发布机构", "发布日期", "人物", "组织机构", "地点", "事件"),
    "medical": ("患者姓名", "性别", "年龄", "就诊日期", "诊断结果", "主治医师", "医院名称"),
}

# Only labels whose values have one form are typed: a typed value that does not fit goes to review.
# Names are typed where the label says whose they are (a person's or an organisation's): the lexicon
# check lets the validation loop re-decode a name that is none. 甲方 and 乙方 may be either, and free
# text has no form, so they stay untyped.
# Labels that hold one value per document. A document read in several windows may get a candidate
# from each: the most confident is the value, the others are kept as alternatives. Every other label
# (人物, 组织机构, 地点, ...) and every label a message spells out itself keeps the union of its windows.
SINGLE_VALUE_LABELS: dict[str, frozenset[str]] = {
    "contract": frozenset({"甲方", "乙方", "签约日期", "合同金额", "合同期限", "签约地点"}),
    "resume": frozenset({"姓名", "性别", "出生日期", "手机号码", "电子邮箱", "学历"}),
    "job_ad": frozenset({"公司名称", "职位名称", "薪资范围", "学历要求", "联系电话"}),
    "news": frozenset({"发布机构", "发布日期"}),
    "medical": frozenset({"患者姓名", "性别", "年龄", "就诊日期", "主治医师", "医院名称"}),
}


def single_value_labels(field_set: str | None) -> frozenset[str]:
    """The labels of `field_set` that hold one value per document (none for labels a message spells out)."""
    return SINGLE_VALUE_LABELS.get(field_set, frozenset()) if field_set else frozenset()


FIELD_SET_TYPES: dict[FieldSetName, dict[str, FieldType]] = {
    "contract": {"签约日期": "date", "合同金额": "amount"},
    "resume": {
        "姓名": "person",
        "出生日期": "date",
        "手机号码": "phone",
        "电子邮箱": "email",
        "毕业院校": "organisation",
        "工作单位": "organisation",
    },
    "job_ad": {"公司名称": "organisation", "薪资范围": "salary", "联系电话": "phone"},
    "news": {"发布机构": "organisation", "发布日期": "date", "人物": "person", "组织机构": "organisation"},
    "medical": {"患者姓名": "person", "就诊日期": "date", "主治医师": "person", "医院名称": "organisation"},
}
