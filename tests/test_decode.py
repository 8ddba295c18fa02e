"""Every kind of bad input gets its own dead-letter code and a message that names the problem."""

from __future__ import annotations

import json

import msgspec
import pytest

import schemas.decode
from schemas.decode import PROMPT_MARKERS, DocumentError, decode_document
from schemas.field_sets import FIELD_SET_TYPES, FIELD_SETS
from schemas.messages import MAX_LABEL_CHARS, MAX_LABELS, ErrorCode

LIMIT = 4096


def doc(**fields) -> bytes:
    base = {"doc_id": "d-1", "text": "甲方：华信科技有限公司", "labels": ["甲方"]}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}, ensure_ascii=False).encode()


BAD_INPUT = [
    ("not json", b"{this is not json", ErrorCode.NOT_JSON),
    ("truncated json", b'{"doc_id": "x", "text": "ab', ErrorCode.NOT_JSON),
    ("json array", b'["doc_id", "text"]', ErrorCode.NOT_AN_OBJECT),
    ("json string", b'"just a string"', ErrorCode.NOT_AN_OBJECT),
    ("missing text", doc(text=...), ErrorCode.EMPTY_TEXT),
    ("empty text", doc(text=""), ErrorCode.EMPTY_TEXT),
    ("blank text", doc(text="  \n\t "), ErrorCode.EMPTY_TEXT),
    ("text not a string", doc(text=42), ErrorCode.WRONG_TYPE),
    ("unknown field_set", doc(labels=..., field_set="horoscope"), ErrorCode.UNKNOWN_FIELD_SET),
    ("empty label list", doc(labels=[]), ErrorCode.NO_LABELS),
    ("neither labels nor field_set", doc(labels=...), ErrorCode.NO_LABELS),
    ("too many labels", doc(labels=[f"l{i}" for i in range(MAX_LABELS + 1)]), ErrorCode.TOO_MANY_LABELS),
    ("label with newline", doc(labels=["甲\n方"]), ErrorCode.INVALID_LABEL),
    ("label with colon", doc(labels=["甲方:"]), ErrorCode.INVALID_LABEL),
    ("label with full-width colon", doc(labels=["甲方："]), ErrorCode.INVALID_LABEL),
    ("label with full-width comma", doc(labels=["甲方，乙方"]), ErrorCode.INVALID_LABEL),
    ("duplicate labels", doc(labels=["甲方", "甲方"]), ErrorCode.INVALID_LABEL),
    ("label with the generation marker", doc(labels=["甲方[GEN]"]), ErrorCode.INVALID_LABEL),
    ("label not a string", doc(labels=[1]), ErrorCode.WRONG_TYPE),
    ("labels not a list", doc(labels="甲方"), ErrorCode.WRONG_TYPE),
    ("empty label", doc(labels=[""]), ErrorCode.INVALID_LABEL),
    ("label with a leading space", doc(labels=[" 甲方"]), ErrorCode.INVALID_LABEL),
    ("label too long", doc(labels=["字" * (MAX_LABEL_CHARS + 1)]), ErrorCode.INVALID_LABEL),
    ("label with an ideographic space inside", doc(labels=["甲\u3000方"]), ErrorCode.INVALID_LABEL),
    ("field_set not a string", doc(labels=..., field_set=5), ErrorCode.WRONG_TYPE),
    ("submitted_at not a timestamp", doc(submitted_at="yesterday"), ErrorCode.INVALID_VALUE),
    (
        "metadata nested 2,000 deep",
        b'{"doc_id": "d", "metadata": ' + b"[" * 2000 + b"]" * 2000 + b"}",
        ErrorCode.WRONG_TYPE,
    ),
    ("invalid utf-8", b'{"doc_id": "d-1", "text": "\xff\xfe bad", "labels": ["a"]}', ErrorCode.INVALID_UTF8),
    ("invalid utf-8 outside strings", b'\xff{"doc_id": "d-1"}', ErrorCode.INVALID_UTF8),
    ("over the size limit", doc(text="字" * LIMIT), ErrorCode.TOO_LARGE),
    ("missing doc_id", doc(doc_id=...), ErrorCode.MISSING_FIELD),
    ("doc_id too long", doc(doc_id="x" * 129), ErrorCode.INVALID_VALUE),
    ("doc_id with control char", doc(doc_id="a\u0007b"), ErrorCode.INVALID_VALUE),
    ("unknown task", doc(task="summarise"), ErrorCode.INVALID_VALUE),
    ("unknown key", doc(colour="red"), ErrorCode.UNKNOWN_FIELD),
    ("labels and field_set", doc(field_set="contract"), ErrorCode.INVALID_VALUE),
    ("future schema version", doc(schema_version=99), ErrorCode.UNSUPPORTED_SCHEMA_VERSION),
    ("tombstone", None, ErrorCode.NOT_JSON),
    ("unknown field type", doc(field_types={"甲方": "horoscope"}), ErrorCode.INVALID_FIELD_TYPE),
    ("field type of a label not asked for", doc(field_types={"乙方": "person"}), ErrorCode.INVALID_FIELD_TYPE),
    ("field types not an object", doc(field_types=["date"]), ErrorCode.INVALID_FIELD_TYPE),
    (
        "field type outside the field set",
        doc(labels=..., field_set="contract", field_types={"身份证号码": "id_card"}),
        ErrorCode.INVALID_FIELD_TYPE,
    ),
]


@pytest.mark.parametrize(("case", "raw", "code"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_gets_its_code(case: str, raw: bytes | None, code: ErrorCode) -> None:
    with pytest.raises(DocumentError) as caught:
        decode_document(raw, LIMIT)
    assert caught.value.code is code, caught.value.message
    # Said in words a sender can act on: a broken pattern is explained, not printed.
    assert caught.value.message and "regex" not in caught.value.message


def test_every_dead_letter_code_is_pinned() -> None:
    # processing_failed and deadline_exceeded are the pipeline's (tests/test_pipeline.py pins them);
    # too_long needs a text beyond the byte limit used here (tests/test_windowed_engine.py pins it);
    # invalid_record is the PostgreSQL sink's, about output records (tests/test_sink_postgres.py pins it).
    assert {code for *_, code in BAD_INPUT} == set(ErrorCode) - {
        ErrorCode.PROCESSING_FAILED,
        ErrorCode.DEADLINE_EXCEEDED,
        ErrorCode.TOO_LONG,
        ErrorCode.INVALID_RECORD,
    }


@pytest.mark.parametrize(("case", "raw", "code"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_codes_do_not_depend_on_msgspecs_wording(monkeypatch, case: str, raw: bytes | None, code: ErrorCode) -> None:
    """The same codes when every validation error says something else entirely, as a msgspec
    release that rewords its errors would."""

    class RewordedDecoder:
        def decode(self, value: bytes) -> object:
            try:
                return decoder.decode(value)
            except msgspec.ValidationError:
                raise msgspec.ValidationError("Object missing required field `text` - at `$.field_types`") from None

    decoder = schemas.decode._decoder
    monkeypatch.setattr(schemas.decode, "_decoder", RewordedDecoder())
    with pytest.raises(DocumentError) as caught:
        decode_document(raw, LIMIT)
    assert caught.value.code is code, caught.value.message


def test_an_unknown_field_set_names_the_known_ones() -> None:
    with pytest.raises(DocumentError) as caught:
        decode_document(doc(labels=..., field_set="horoscope"), LIMIT)
    assert "horoscope" in caught.value.message and "job_ad" in caught.value.message


def test_messages_carry_the_path_to_the_bad_field() -> None:
    with pytest.raises(DocumentError) as caught:
        decode_document(doc(text=42), LIMIT)
    assert "$.text" in caught.value.message


def test_doc_id_is_kept_when_the_message_has_one() -> None:
    with pytest.raises(DocumentError) as caught:
        decode_document(doc(labels=[]), LIMIT)
    assert caught.value.doc_id == "d-1"


def test_field_set_resolves_to_its_labels() -> None:
    document = decode_document(doc(labels=..., field_set="contract"), LIMIT)
    assert document.labels == FIELD_SETS["contract"]
    assert "甲方" in document.labels and "合同金额" in document.labels


def test_valid_document_keeps_everything() -> None:
    raw = doc(source="ocr-7", trace_id="t-1", metadata={"batch": "42"}, submitted_at="2026-12-01T08:00:00Z")
    document = decode_document(raw, LIMIT)
    assert (document.doc_id, document.task, document.labels) == ("d-1", "extract", ("甲方",))
    assert (document.source, document.trace_id, document.metadata) == ("ocr-7", "t-1", {"batch": "42"})
    assert document.submitted_at is not None and document.submitted_at.year == 2026


def test_every_shipped_field_set_is_valid_in_a_prompt() -> None:
    for name, labels in FIELD_SETS.items():
        assert decode_document(doc(labels=list(labels)), LIMIT).labels == labels, name


def test_an_unknown_field_type_names_the_known_ones() -> None:
    with pytest.raises(DocumentError) as caught:
        decode_document(doc(field_types={"甲方": "horoscope"}), LIMIT)
    assert "horoscope" in caught.value.message and "id_card" in caught.value.message
    assert "$.field_types" in caught.value.message and caught.value.doc_id == "d-1"


def test_field_types_default_to_empty_and_are_kept() -> None:
    assert decode_document(doc(), LIMIT).field_types == {}
    typed = decode_document(doc(field_types={"甲方": "organisation"}), LIMIT)
    assert typed.field_types == {"甲方": "organisation"}


def test_a_field_set_brings_its_types_and_the_message_may_override_them() -> None:
    contract = decode_document(doc(labels=..., field_set="contract"), LIMIT)
    assert contract.field_types == FIELD_SET_TYPES["contract"]
    overridden = decode_document(doc(labels=..., field_set="contract", field_types={"签约日期": "text"}), LIMIT)
    assert overridden.field_types == {**FIELD_SET_TYPES["contract"], "签约日期": "text"}


def test_every_shipped_field_set_types_only_its_own_labels() -> None:
    for name, types in FIELD_SET_TYPES.items():
        assert set(types) <= set(FIELD_SETS[name]), name


@pytest.mark.parametrize("marker", PROMPT_MARKERS)
def test_a_label_holding_a_prompt_marker_is_a_dead_letter_that_names_it(marker: str) -> None:
    with pytest.raises(DocumentError) as caught:
        decode_document(doc(labels=["乙方", f"甲方{marker}名称"]), LIMIT)
    assert caught.value.code is ErrorCode.INVALID_LABEL
    assert repr(marker) in caught.value.message and "$.labels[1]" in caught.value.message
