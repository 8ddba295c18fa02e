"""Turning raw topic bytes into a `Document`, or into the reason it cannot become one.

This is the edge of the pipeline: everything past it may assume a well-formed document whose
labels are safe to put into SeqGPT's prompt.
"""

from __future__ import annotations

import typing
from typing import NamedTuple

import msgspec

from schemas.field_sets import FIELD_SET_TYPES, FIELD_SETS, FieldSetName, FieldType
from schemas.messages import MAX_LABEL_CHARS, MAX_LABELS, SCHEMA_VERSION, Document, ErrorCode, Label, RawDocument

# Longer documents are read in windows (model/windows/split.py); beyond this many characters they are
# dead letters (`too_long`) rather than hours of one worker's time.
MAX_DOCUMENT_CHARS = 100_000
# SeqGPT's own prompt markers (`输入: {text}\n抽取: {labels}\n输出: [GEN]`): a label holding one would
# hand the model a second instruction or a second place to start answering. The colon forms already
# break the label's pattern, but are named here so that the message says what was found.
PROMPT_MARKERS = ("[GEN]", "输入:", "输出:", "抽取:", "分类:")

_decoder = msgspec.json.Decoder(RawDocument)
_FIELDS = {field.encode_name: field for field in msgspec.structs.fields(RawDocument)}
KNOWN_TYPES = ", ".join(typing.get_args(FieldType))
KNOWN_FIELD_SETS = ", ".join(typing.get_args(FieldSetName))

# The dead-letter code of a message that breaks RawDocument's rules, by the field it breaks them at:
# our own table, read against the struct, never from msgspec's wording of the error (`labels` has
# three rules and codes of its own: `_labels_rule`).
_BROKEN_RULE = {
    "doc_id": ErrorCode.INVALID_VALUE,
    "text": ErrorCode.EMPTY_TEXT,
    "field_set": ErrorCode.UNKNOWN_FIELD_SET,
    "field_types": ErrorCode.INVALID_FIELD_TYPE,
}
# ... where a value of the wrong JSON type at that field has a code of its own (else `wrong_type`).
_WRONG_TYPE = {"field_types": ErrorCode.INVALID_FIELD_TYPE}
# ... and where a missing field has a code of its own (else `missing_field`).
_MISSING = {"text": ErrorCode.EMPTY_TEXT}
# What the sender reads where msgspec's own words would show a regular expression.
_RULE_TEXT = {
    "doc_id": "doc_id must be 1-128 printable characters - at `$.doc_id`",
    "text": "text is empty - at `$.text`",
}
LABEL_RULE_TEXT = (
    "label {label!r} must be 1-{most} characters without surrounding spaces, newline, tab, colon or"
    " full-width comma, which break the prompt - at `$.labels[{i}]`"
)
MARKER_TEXT = "label {label!r} contains the prompt marker {marker!r} - at `$.labels[{i}]`"
# msgspec names the bad value but not the good ones, which the sender needs to fix the message.
_HINTS = {
    ErrorCode.INVALID_FIELD_TYPE: f" (known types: {KNOWN_TYPES})",
    ErrorCode.UNKNOWN_FIELD_SET: f" (known field sets: {KNOWN_FIELD_SETS})",
}


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
        code, rule_text = broken_rule(value)
        message = rule_text or str(exc) + _HINTS.get(code, "")
        raise DocumentError(code, message, salvage_doc_id(value)) from None
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

    # The struct's pattern keeps control characters out; what else Python counts unprintable
    # (unassigned code points, format characters, separators) has no portable pattern.
    if not raw.doc_id.isprintable():
        raise fail(ErrorCode.INVALID_VALUE, _RULE_TEXT["doc_id"])
    if raw.schema_version != SCHEMA_VERSION:
        raise fail(
            ErrorCode.UNSUPPORTED_SCHEMA_VERSION,
            f"schema_version {raw.schema_version} is not supported (this worker reads {SCHEMA_VERSION})",
        )
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
        return FIELD_SETS[raw.field_set]
    if raw.labels is None:
        raise fail(ErrorCode.NO_LABELS, "no labels: give a non-empty `labels` list or a `field_set`")
    # Count, length, edges and prompt-breaking characters are the struct's rules (RawDocument.labels).
    for i, label in enumerate(raw.labels):
        marker = prompt_marker(label)
        if marker is not None:
            raise fail(ErrorCode.INVALID_LABEL, MARKER_TEXT.format(label=label, marker=marker, i=i))
        if not label.isprintable():
            raise fail(ErrorCode.INVALID_LABEL, f"label {label!r} has an unprintable character - at `$.labels[{i}]`")
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


class Rejection(NamedTuple):
    code: ErrorCode
    # The rule broken in the sender's words, where msgspec's error would not do; else None.
    rule_text: str | None = None


def broken_rule(value: bytes) -> Rejection:
    """Why well-formed JSON that RawDocument rejects is rejected, found by checking the message
    against the struct field by field in the order msgspec reads it (keys as they come, then the
    missing ones), so the code names the rule msgspec's error is about."""
    try:
        # Each value stays raw JSON, decoded below against its field's type alone.
        fields = msgspec.json.decode(value, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:
        return Rejection(ErrorCode.NOT_AN_OBJECT)
    except RecursionError:
        # Even skipping over a value walks its nesting. No field of RawDocument nests deeper than
        # a list or map of strings, so a value nested too deep to walk has the wrong type.
        return Rejection(ErrorCode.WRONG_TYPE)
    for name, item in fields.items():
        field = _FIELDS.get(name)
        if field is None:
            return Rejection(ErrorCode.UNKNOWN_FIELD)
        if _fits(item, field.type):
            continue
        if not _fits(item, _json_shape(msgspec.inspect.type_info(field.type))):
            return Rejection(_WRONG_TYPE.get(name, ErrorCode.WRONG_TYPE))
        if name == "labels":
            return _labels_rule(msgspec.json.decode(item, type=list[str]))
        return Rejection(_BROKEN_RULE.get(name, ErrorCode.INVALID_VALUE), _RULE_TEXT.get(name))
    missing = next(name for name, field in _FIELDS.items() if field.required and name not in fields)
    return Rejection(_MISSING.get(missing, ErrorCode.MISSING_FIELD))


def _labels_rule(labels: list[str]) -> Rejection:
    """Which of its rules a list of strings at `labels` breaks: too few, too many, or one label's own."""
    if not labels:
        return Rejection(ErrorCode.NO_LABELS, "no labels: give a non-empty `labels` list or a `field_set`")
    if len(labels) > MAX_LABELS:
        return Rejection(ErrorCode.TOO_MANY_LABELS, f"{len(labels)} labels, at most {MAX_LABELS} are allowed")
    i, label = next((i, label) for i, label in enumerate(labels) if not _fits(msgspec.json.encode(label), Label))
    marker = prompt_marker(label)
    if marker is not None:
        return Rejection(ErrorCode.INVALID_LABEL, MARKER_TEXT.format(label=label, marker=marker, i=i))
    return Rejection(ErrorCode.INVALID_LABEL, LABEL_RULE_TEXT.format(label=label, most=MAX_LABEL_CHARS, i=i))


def prompt_marker(label: str) -> str | None:
    return next((m for m in PROMPT_MARKERS if m in label), None)


def _fits(item: bytes | msgspec.Raw, kind: object) -> bool:
    try:
        msgspec.json.decode(item, type=kind)
    except msgspec.ValidationError:
        return False
    return True


def _json_shape(t: msgspec.inspect.Type) -> object:
    """The type `t` with its constraints dropped: only which JSON types it accepts, so that a value
    that fits the shape but not `t` broke a rule, and one that does not fit it has the wrong type."""
    match t:
        case msgspec.inspect.Metadata():
            return _json_shape(t.type)
        case msgspec.inspect.UnionType():
            return typing.Union[tuple(_json_shape(member) for member in t.types)]  # noqa: UP007
        case msgspec.inspect.ListType():
            return list[_json_shape(t.item_type)]
        case msgspec.inspect.DictType():
            return dict[_json_shape(t.key_type), _json_shape(t.value_type)]
        case msgspec.inspect.LiteralType():
            return typing.Union[tuple({type(v) for v in t.values})]  # noqa: UP007
        case msgspec.inspect.IntType():
            return int
        case msgspec.inspect.FloatType():
            return float
        case msgspec.inspect.BoolType():
            return bool
        case msgspec.inspect.NoneType():
            return None
        case _:  # strings, and what JSON writes as strings: datetimes, enums
            return str


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
