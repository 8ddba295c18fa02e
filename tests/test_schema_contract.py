"""The published raw-document contract, checked the way an ingest or BI team would: the exported
JSON Schema file and a JSON Schema validator, beside what the worker itself accepts.

Each rejected sample names the dead-letter code the worker gives it, so the schema and the worker
are seen to draw the same line; the few rules a JSON Schema cannot carry are listed as such.
"""

from __future__ import annotations

import json
import typing

import pytest
from jsonschema import Draft202012Validator

from schemas.decode import DocumentError, decode_document
from schemas.export import JSON_DIR
from schemas.field_sets import FIELD_SETS, FieldSetName
from schemas.messages import MAX_LABELS, ErrorCode

LIMIT = 1 << 20


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads((JSON_DIR / "raw_document.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def message(**fields: object) -> dict:
    base: dict = {"doc_id": "c-0001", "text": "甲方：上海恒达物流有限公司", "labels": ["甲方"]}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


ACCEPTED = {
    "labels": message(),
    "a field set": message(labels=..., field_set="contract"),
    "a field set and null labels": message(labels=None, field_set="resume"),
    "every optional field": message(
        task="classify",
        source="ocr-3",
        submitted_at="2026-12-02T08:00:00Z",
        trace_id="abc",
        metadata={"batch": "17"},
        field_types={"甲方": "organisation"},
        schema_version=1,
    ),
    "64 labels of 64 characters": message(labels=[f"{i:02d}" + "字" * 62 for i in range(MAX_LABELS)]),
    "a label with a space inside": message(labels=["签约 日期"]),
    "a doc_id of 128 characters": message(doc_id="x" * 128),
}

REJECTED = {
    "no doc_id": (message(doc_id=...), ErrorCode.MISSING_FIELD),
    "an empty doc_id": (message(doc_id=""), ErrorCode.INVALID_VALUE),
    "a doc_id of 129 characters": (message(doc_id="x" * 129), ErrorCode.INVALID_VALUE),
    "a doc_id with a control character": (message(doc_id="a\u0007b"), ErrorCode.INVALID_VALUE),
    "no text": (message(text=...), ErrorCode.EMPTY_TEXT),
    "blank text": (message(text=" \n\t "), ErrorCode.EMPTY_TEXT),
    "text not a string": (message(text=42), ErrorCode.WRONG_TYPE),
    "an unknown task": (message(task="summarise"), ErrorCode.INVALID_VALUE),
    "an unknown key": (message(colour="red"), ErrorCode.UNKNOWN_FIELD),
    "neither labels nor a field set": (message(labels=...), ErrorCode.NO_LABELS),
    "labels and a field set": (message(field_set="contract"), ErrorCode.INVALID_VALUE),
    "no labels in the list": (message(labels=[]), ErrorCode.NO_LABELS),
    "65 labels": (message(labels=[f"l{i}" for i in range(MAX_LABELS + 1)]), ErrorCode.TOO_MANY_LABELS),
    "a repeated label": (message(labels=["甲方", "甲方"]), ErrorCode.INVALID_LABEL),
    "an empty label": (message(labels=[""]), ErrorCode.INVALID_LABEL),
    "a label of 65 characters": (message(labels=["字" * 65]), ErrorCode.INVALID_LABEL),
    "a label with a trailing space": (message(labels=["甲方 "]), ErrorCode.INVALID_LABEL),
    "a label with a newline": (message(labels=["甲\n方"]), ErrorCode.INVALID_LABEL),
    "a label with a tab": (message(labels=["甲\t方"]), ErrorCode.INVALID_LABEL),
    "a label with a colon": (message(labels=["name:first"]), ErrorCode.INVALID_LABEL),
    "a label with a full-width colon": (message(labels=["甲方："]), ErrorCode.INVALID_LABEL),
    "a label with a full-width comma": (message(labels=["甲方，乙方"]), ErrorCode.INVALID_LABEL),
    "a label not a string": (message(labels=[1]), ErrorCode.WRONG_TYPE),
    "an unknown field set": (message(labels=..., field_set="horoscope"), ErrorCode.UNKNOWN_FIELD_SET),
    "an unknown field type": (message(field_types={"甲方": "horoscope"}), ErrorCode.INVALID_FIELD_TYPE),
    "metadata not strings": (message(metadata={"batch": 17}), ErrorCode.WRONG_TYPE),
    "not an object": (["c-0001", "text"], ErrorCode.NOT_AN_OBJECT),
}

# What the worker rejects but no JSON Schema can say: rules across fields or over Unicode categories.
WORKER_ONLY = {
    # Python's "printable" excludes format characters and unassigned code points: no portable pattern.
    "a doc_id with a zero-width space": (message(doc_id="a\u200bb"), ErrorCode.INVALID_VALUE),
    "a label with an ideographic space inside": (message(labels=["甲\u3000方"]), ErrorCode.INVALID_LABEL),
    # A type for a label the message did not ask for.
    "a field type for another label": (message(field_types={"乙方": "person"}), ErrorCode.INVALID_FIELD_TYPE),
    # The schema states the field; which versions a worker reads is the worker's.
    "a future schema version": (message(schema_version=2), ErrorCode.UNSUPPORTED_SCHEMA_VERSION),
}


def worker_code(sample: object) -> ErrorCode | None:
    try:
        decode_document(json.dumps(sample, ensure_ascii=False).encode(), LIMIT)
    except DocumentError as error:
        return error.code
    return None


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_schema_and_the_worker_accept(validator: Draft202012Validator, name: str) -> None:
    sample = ACCEPTED[name]
    assert list(validator.iter_errors(sample)) == []
    assert worker_code(sample) is None


@pytest.mark.parametrize("name", REJECTED)
def test_the_schema_and_the_worker_reject(validator: Draft202012Validator, name: str) -> None:
    sample, code = REJECTED[name]
    assert not validator.is_valid(sample)
    assert worker_code(sample) is code


@pytest.mark.parametrize("name", WORKER_ONLY)
def test_what_only_the_worker_can_check(validator: Draft202012Validator, name: str) -> None:
    sample, code = WORKER_ONLY[name]
    assert validator.is_valid(sample)
    assert worker_code(sample) is code


def test_the_field_set_names_in_the_contract_are_the_shipped_sets() -> None:
    assert set(typing.get_args(FieldSetName)) == set(FIELD_SETS)
