"""Turning raw topic bytes into a `Document`, or into the reason it cannot become one.

This is the edge of the pipeline: everything past it may assume a well-formed document whose
labels are safe to put into SeqGPT's prompt.
"""

from __future__ import annotations

import re
import typing

import msgspec

from schemas.field_sets import FIELD_SET_TYPES, FIELD_SETS, FieldType
from schemas.messages import SCHEMA_VERSION, Document, ErrorCode, RawDocument

MAX_LABELS = 64
MAX_LABEL_CHARS = 64
# Longer documents are read in windows (model/windows/split.py); beyond this many characters they are
# dead letters (`too_long`) rather than hours of one worker's time.
MAX_DOCUMENT_CHARS = 100_000
# Characters that would change the prompt's structure: a newline starts a new prompt line, a colon
# separates a label from its value, and the full-width comma separates the labels themselves.
PROMPT_BREAKING = re.compile(r"[\n\r:：，\t]")
# SeqGPT's own prompt markers (`输入: {text}\n抽取: {labels}\n输出: [GEN]`): a label holding one would
# hand the model a second instruction or a second place to start answering. The colon forms are
# already caught by the colon rule, but are named here so that the message says what was found.
PROMPT_MARKERS = ("[GEN]", "输入:", "输出:", "抽取:", "分类:")

_decoder = msgspec.json.Decoder(RawDocument)
KNOWN_TYPES = ", ".join(typing.get_args(FieldType))


class DocumentError(Exception):
    """A raw message that cannot be processed; `code` goes into its dead-letter record."""

    def __init__(self, code: ErrorCode, message: str, doc_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.doc_id = doc_id


def decode_document(value: bytes | None, max_bytes: int, max_chars: int = MAX_DOCUMENT_CHARS) -> Document:
    """Validate one raw message; raises `DocumentError` with a code and a human message."""
    if value is None:
        raise DocumentError(ErrorCode.NOT_JSON, "message has no value (tombstone)")
    if len(value) > max_bytes:
        raise DocumentError(ErrorCode.TOO_LARGE, f"message is {len(value)} bytes, the limit is {max_bytes}")
    try:
        raw = _decoder.decode(value)
    except msgspec.ValidationError as exc:
        code = _validation_code(str(exc))
        # msgspec names the bad type but not the good ones, which the sender needs to fix the message.
        hint = f" (known types: {KNOWN_TYPES})" if code is ErrorCode.INVALID_FIELD_TYPE else ""
        raise DocumentError(code, str(exc) + hint, salvage_doc_id(value)) from None
    except msgspec.DecodeError as exc:
        raise DocumentError(_syntax_code(value), str(exc)) from None
    except RecursionError:
        # An untyped decode (salvage_doc_id) of `[[[[...` a few thousand deep exhausts the stack;
        # the typed one stops at the first wrong type, but a hostile message must never crash us.
        raise DocumentError(ErrorCode.NOT_JSON, "JSON is nested too deeply to decode") from None
    return _check(raw, max_chars)


def _check(raw: RawDocument, max_chars: int) -> Document:
    def fail(code: ErrorCode, message: str) -> DocumentError:
        return DocumentError(code, message, raw.doc_id)

    if not raw.doc_id.isprintable():
        raise fail(ErrorCode.INVALID_VALUE, "doc_id must contain only printable characters - at `$.doc_id`")
    if raw.schema_version != SCHEMA_VERSION:
        raise fail(
            ErrorCode.UNSUPPORTED_SCHEMA_VERSION,
            f"schema_version {raw.schema_version} is not supported (this worker reads {SCHEMA_VERSION})",
        )
    if not raw.text.strip():
        raise fail(ErrorCode.EMPTY_TEXT, "text is empty - at `$.text`")
    if len(raw.text) > max_chars:
        raise fail(ErrorCode.TOO_LONG, f"text is {len(raw.text)} characters, the limit is {max_chars} - at `$.text`")
    labels = _resolve_labels(raw, fail)
    return Document(
        doc_id=raw.doc_id,
        text=raw.text,
        task=raw.task,
        labels=labels,
        field_types=_resolve_field_types(raw, labels, fail),
        source=raw.source,
        submitted_at=raw.submitted_at,
        trace_id=raw.trace_id,
        metadata=raw.metadata,
        field_set=raw.field_set,
    )


def _resolve_labels(raw: RawDocument, fail) -> tuple[str, ...]:
    if raw.labels is not None and raw.field_set is not None:
        raise fail(ErrorCode.INVALID_VALUE, "give either `labels` or `field_set`, not both")
    if raw.field_set is not None:
        if raw.field_set not in FIELD_SETS:
            known = ", ".join(sorted(FIELD_SETS))
            raise fail(ErrorCode.UNKNOWN_FIELD_SET, f"unknown field_set {raw.field_set!r} (known: {known})")
        return FIELD_SETS[raw.field_set]
    if not raw.labels:
        raise fail(ErrorCode.NO_LABELS, "no labels: give a non-empty `labels` list or a `field_set`")
    if len(raw.labels) > MAX_LABELS:
        raise fail(ErrorCode.TOO_MANY_LABELS, f"{len(raw.labels)} labels, at most {MAX_LABELS} are allowed")
    for i, label in enumerate(raw.labels):
        where = f" - at `$.labels[{i}]`"
        if not label.strip() or label != label.strip():
            raise fail(ErrorCode.INVALID_LABEL, "a label must be non-empty without surrounding spaces" + where)
        if len(label) > MAX_LABEL_CHARS:
            raise fail(ErrorCode.INVALID_LABEL, f"a label may have at most {MAX_LABEL_CHARS} characters" + where)
        marker = next((m for m in PROMPT_MARKERS if m in label), None)
        if marker is not None:
            raise fail(ErrorCode.INVALID_LABEL, f"label {label!r} contains the prompt marker {marker!r}" + where)
        if PROMPT_BREAKING.search(label) or not label.isprintable():
            raise fail(
                ErrorCode.INVALID_LABEL,
                f"label {label!r} contains a newline, tab, colon or full-width comma, which break the prompt" + where,
            )
    if len(set(raw.labels)) != len(raw.labels):
        raise fail(ErrorCode.INVALID_LABEL, "labels must be unique")
    return tuple(raw.labels)


def _resolve_field_types(raw: RawDocument, labels: tuple[str, ...], fail) -> dict[str, FieldType]:
    """The field set's types overlaid with the message's own; a type for a label not asked for is a mistake upstream."""
    types = dict(FIELD_SET_TYPES.get(raw.field_set, {})) if raw.field_set is not None else {}
    for label, kind in (raw.field_types or {}).items():
        if label not in labels:
            raise fail(
                ErrorCode.INVALID_FIELD_TYPE,
                f"field_types names {label!r}, which is not a requested label - at `$.field_types`",
            )
        types[label] = kind
    return types


def _validation_code(message: str) -> ErrorCode:
    # msgspec's messages are stable and carry the path; the code is read from their wording.
    if message.endswith("- at `$.field_types[...]`") or message.endswith("- at `$.field_types`"):
        return ErrorCode.INVALID_FIELD_TYPE
    if message.startswith("Object missing required field `text`"):
        return ErrorCode.EMPTY_TEXT
    if message.startswith("Object missing required field"):
        return ErrorCode.MISSING_FIELD
    if message.startswith("Object contains unknown field"):
        return ErrorCode.UNKNOWN_FIELD
    if message.startswith("Expected `object`") and " - at " not in message:
        return ErrorCode.NOT_AN_OBJECT
    if message.startswith("Expected `") and "got `" in message:
        return ErrorCode.WRONG_TYPE
    return ErrorCode.INVALID_VALUE


def _syntax_code(value: bytes) -> ErrorCode:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return ErrorCode.INVALID_UTF8
    return ErrorCode.NOT_JSON


def salvage_doc_id(value: bytes) -> str | None:
    """The doc_id of an invalid but well-formed message, so its dead letter can be found by id."""
    try:
        obj = msgspec.json.decode(value)
    except (msgspec.DecodeError, RecursionError):
        return None
    doc_id = obj.get("doc_id") if isinstance(obj, dict) else None
    return doc_id if isinstance(doc_id, str) and 0 < len(doc_id) <= 128 else None
