"""The message contracts of every SeqStream topic.

Every message carries `schema_version`. Output records keep everything that depends on *when* or
*where* a document was processed in `processing`, so a redelivered document yields the same bytes
outside that part and downstream upserts keyed by `doc_id` absorb the duplicate.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from schemas.field_sets import FieldSetName, FieldType

SCHEMA_VERSION = 1

Task = Literal["extract", "classify"]

# The input rules live in these types, so that the exported JSON Schema carries them to every
# consumer. Patterns are written for both Python's `re` (msgspec, the `jsonschema` package) and
# ECMA-262 (JSON Schema's own dialect). A control character is never printable.
NO_CONTROL = r"\u0000-\u001f\u007f-\u009f"
DocId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=128,
        pattern=f"^[^{NO_CONTROL}]+$",
        description="1-128 printable characters; the Kafka key of every output.",
    ),
]
MAX_LABELS = 64
MAX_LABEL_CHARS = 64
# Characters that would change the prompt's structure: a newline starts a new prompt line, a colon
# separates a label from its value, and the full-width comma separates the labels themselves.
PROMPT_BREAKING = r"\n\r\t:：，"
_LABEL_EDGE = f"[^\\s{PROMPT_BREAKING}{NO_CONTROL}]"
Label = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_LABEL_CHARS,
        pattern=f"^{_LABEL_EDGE}(?:[^{PROMPT_BREAKING}{NO_CONTROL}]*{_LABEL_EDGE})?$",
        description="no surrounding spaces, no newline, tab, colon or full-width comma (they break SeqGPT's prompt)",
    ),
]
Labels = Annotated[
    list[Label],
    msgspec.Meta(
        min_length=1,
        max_length=MAX_LABELS,
        # The worker checks it itself: msgspec passes extra_json_schema through without enforcing it.
        extra_json_schema={"uniqueItems": True},
        description=f"1-{MAX_LABELS} unique labels.",
    ),
]
Text = Annotated[str, msgspec.Meta(pattern=r"\S", description="The document; not empty or only whitespace.")]


class RawDocument(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What upstream OCR/ingest systems publish to the raw topic (JSON, UTF-8)."""

    doc_id: DocId
    text: Text
    task: Task = "extract"
    labels: Labels | None = None
    field_set: Annotated[FieldSetName | None, msgspec.Meta(description="Instead of labels, a named label set.")] = None
    field_types: Annotated[
        dict[str, FieldType] | None,
        msgspec.Meta(
            description="label -> value type, for requested labels only; a field set's own types apply unless "
            "overridden here. Typed values are normalised and go to review when they do not fit their type."
        ),
    ] = None
    source: str | None = None
    submitted_at: datetime | None = None
    trace_id: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION


# What a JSON Schema can say about a raw document beyond its fields: `labels` or `field_set`, one of them.
RAW_DOCUMENT_EITHER_LABELS_OR_FIELD_SET = {
    "oneOf": [
        {"required": ["labels"], "properties": {"labels": {"type": "array"}}},
        {"required": ["field_set"], "properties": {"field_set": {"type": "string"}}},
    ]
}


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """A raw document that passed validation, with its label set resolved; what the engine sees."""

    doc_id: str
    text: str
    task: Task
    labels: tuple[str, ...]
    field_types: dict[str, FieldType] = msgspec.field(default_factory=dict)
    source: str | None = None
    submitted_at: datetime | None = None
    trace_id: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    # The named field set the labels came from, if any: it says which labels hold one value.
    field_set: str | None = None


NormalisedKind = Literal["date", "amount", "salary", "phone", "id_card", "email"]


class Normalised(msgspec.Struct, frozen=True, kw_only=True):
    """A typed value in one canonical form, so consumers compare values instead of spellings.

    Dates are ISO 8601 at the precision written (`2024-03-15`, `2024-03`, `2024`); amounts are
    decimal strings in whole currency units. A range keeps its start in `value` and its end in `end`
    (ISO 8601 writes it `value/end`). A salary is always a range: `value` its low end, `end` its
    high end (equal for one amount, None for an open one such as `8000元以上`), `unit` its period.
    """

    kind: NormalisedKind
    value: str
    end: str | None = None
    # What an amount or a salary is per (`month`, `year`, `day`, `hour`), as in 月薪, 元/月 or ·13薪.
    unit: str | None = None
    # ISO 4217 code, when the text names or implies a currency.
    currency: str | None = None


class Span(msgspec.Struct, frozen=True, kw_only=True):
    """One extracted value: `text == document.text[start:end]`, with its normal form when its label is typed."""

    text: str
    start: int
    end: int
    confidence: float
    # Top-1 minus top-2 probability at the value's least certain step: how close greedy came to another value.
    margin: float
    # Times the validation loop re-decoded this value before it passed (model/retry.py).
    retries: int = 0
    # The value's normal form when its label is typed (model/normalize.py); the text above stays as read.
    normalised: Normalised | None = None
    # Which of the record's `windows` the model read the value in (0 for a document read whole).
    window: int = 0


class TextWindow(msgspec.Struct, frozen=True, kw_only=True):
    """Characters [start, end) of the document that the model read in one window (model/windows/split.py)."""

    start: int
    end: int


class TokenChoice(msgspec.Struct, frozen=True, kw_only=True):
    token_id: int
    text: str
    prob: float


class EntropyAlarm(msgspec.Struct, frozen=True, kw_only=True):
    """A decode step whose next-token distribution was flatter than the threshold allows."""

    chunk: int
    step: int
    entropy_nats: float
    threshold: float
    chosen: TokenChoice
    alternatives: list[TokenChoice]


class DecodeSettings(msgspec.Struct, frozen=True, kw_only=True):
    strategy: Literal["greedy"] = "greedy"
    max_new_tokens: int
    max_input_tokens: int
    labels_per_prompt: int
    confidence_threshold: float
    entropy_threshold: float
    # Deciding steps above the threshold a record needs before it alarms.
    entropy_alarm_steps: int = 1


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Which model and decode settings produced a record."""

    name: str
    engine: str
    attention: str
    dtype: str
    device: str
    demo: bool
    decode: DecodeSettings


class Timings(msgspec.Struct, kw_only=True):
    """Milliseconds per stage; model stages are the batch's, shared by its documents."""

    queue_ms: float = 0.0
    tokenize_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    # The part of decode_ms spent on the answer grammar's masks (model/constraints.py).
    constrain_ms: float = 0.0
    postprocess_ms: float = 0.0
    # The lexicon backoff after the batch's decode (model/answers/backoff.py): LAC and candidate scoring.
    backoff_ms: float = 0.0


class Processing(msgspec.Struct, kw_only=True):
    """Where and when a record was made: the only part that differs between redeliveries."""

    worker_id: str
    source_topic: str
    partition: int
    offset: int
    received_at: datetime
    completed_at: datetime
    batch_size: int
    timings: Timings


class ReviewCode(enum.Enum):
    LOW_CONFIDENCE = "low_confidence"
    NOT_IN_SOURCE = "not_in_source"
    TRUNCATED = "truncated"
    ENTROPY_ALARM = "entropy_alarm"
    UNKNOWN_LABEL = "unknown_label"
    DUPLICATE_LABEL = "duplicate_label"
    MALFORMED_OUTPUT = "malformed_output"
    INCOMPLETE_OUTPUT = "incomplete_output"
    TYPE_MISMATCH = "type_mismatch"
    # The gate's cross-checks against the source text (model/answers/checks.py).
    VALUE_BOUNDARY = "value_boundary"
    UNCLAIMED_VALUE = "unclaimed_value"
    EMPTY_RECORD = "empty_record"
    # A label answered None whose value the model then picked among a lexicon's candidates
    # (model/answers/backoff.py): the pick and the candidates are in the review record.
    LEXICON_BACKOFF = "lexicon_backoff"


class ReviewReason(msgspec.Struct, frozen=True, kw_only=True):
    code: ReviewCode
    detail: str
    label: str | None = None
    value: str | None = None


class ReviewMark(msgspec.Struct, frozen=True, kw_only=True):
    """Who cleared a review record on the review desk (streams/review/), and which one: a fields
    record carrying it was decided by a person, not routed by the gate."""

    reviewer: str
    decided_at: datetime
    action: Literal["accepted", "corrected"]
    # The review record decided: its topic, partition, offset and key (the document's doc_id).
    review_topic: str
    review_partition: int
    review_offset: int


class FieldRecord(msgspec.Struct, kw_only=True):
    """A validated extraction, on the fields topic, keyed by `doc_id`."""

    schema_version: int = SCHEMA_VERSION
    doc_id: str
    task: Task
    labels: list[str]
    fields: dict[str, list[Span]]
    classes: list[str]
    model: ModelInfo
    source: str | None
    submitted_at: datetime | None
    trace_id: str | None
    metadata: dict[str, str]
    processing: Processing
    # The windows the document was read in, in order: one unless it is longer than the model's window.
    windows: list[TextWindow] = msgspec.field(default_factory=list)
    # Labels that hold one value (a field set's 签约日期, 甲方, ...): the less confident candidates
    # other windows gave, at their offsets; `fields` holds the most confident.
    alternatives: dict[str, list[Span]] = msgspec.field(default_factory=dict)
    # Set when a person decided the record on the review desk; None when the gate routed it here.
    reviewed: ReviewMark | None = None


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A value the lexicon backoff offered for a label: a span of the source and how it was found."""

    text: str
    start: int
    end: int
    # The model's share among the label's candidates when it was made to choose (None not legal).
    score: float
    # What found it: "lac:PER", "lac:ORG", "lac:LOC", "lac:TIME", a typed detector ("phone", "date", ...),
    # or "cue" (a closed-vocabulary label's value: a degree, an age, a sex, a diagnosis after its cue).
    source: str
    # The candidate the model picked for the label.
    picked: bool = False


class ReviewRecord(FieldRecord, kw_only=True):
    """A record a person must look at, on the review topic; `fields` holds only verified spans."""

    reasons: list[ReviewReason]
    # Per label the backoff re-decoded: the values a reviewer can accept with one click, best first.
    candidates: dict[str, list[Candidate]] = msgspec.field(default_factory=dict)
    # The document's text, so the review desk can show every value at its offsets without the raw topic.
    text: str | None = None


class AlertRecord(msgspec.Struct, kw_only=True):
    """Something operations must hear about, on the alerts topic."""

    schema_version: int = SCHEMA_VERSION
    alert_id: str
    kind: Literal["entropy", "pipeline"]
    severity: Literal["warning", "critical"]
    doc_id: str | None
    trace_id: str | None
    message: str
    alarmed_steps: int = 0
    alarms: list[EntropyAlarm] = msgspec.field(default_factory=list)
    worker_id: str
    raised_at: datetime


class ErrorCode(enum.Enum):
    """Why a raw message could not be processed; a fixed list that DLQ consumers may switch on."""

    TOO_LARGE = "too_large"
    INVALID_UTF8 = "invalid_utf8"
    NOT_JSON = "not_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    UNKNOWN_FIELD = "unknown_field"
    WRONG_TYPE = "wrong_type"
    INVALID_VALUE = "invalid_value"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    EMPTY_TEXT = "empty_text"
    UNKNOWN_FIELD_SET = "unknown_field_set"
    NO_LABELS = "no_labels"
    TOO_MANY_LABELS = "too_many_labels"
    INVALID_LABEL = "invalid_label"
    INVALID_FIELD_TYPE = "invalid_field_type"
    TOO_LONG = "too_long"
    PROCESSING_FAILED = "processing_failed"
    # The engine ran past the batch deadline on this document alone (streams/flow/batching.py).
    DEADLINE_EXCEEDED = "deadline_exceeded"
    # Not a raw document: a record on an output topic that a downstream reader of ours (the
    # PostgreSQL sink) cannot take; `source_topic` names the topic, `message` the reason.
    INVALID_RECORD = "invalid_record"


class DeadLetter(msgspec.Struct, kw_only=True):
    """A message that could not be processed, with its original bytes (base64 in JSON) untouched."""

    schema_version: int = SCHEMA_VERSION
    error_code: ErrorCode
    message: str
    doc_id: str | None
    original_key: bytes | None
    original_value: bytes
    source_topic: str
    partition: int
    offset: int
    worker_id: str
    received_at: datetime


class TokenTrace(msgspec.Struct, frozen=True, kw_only=True):
    """One greedy decode step of one prompt, as the model saw it."""

    step: int
    token_id: int
    text: str
    prob: float
    # The chosen token's probability minus the runner-up's: how close the greedy choice was.
    margin: float
    entropy_nats: float
    # Set by engines that constrain decoding: the grammar left one legal token.
    forced: bool = False


class PromptTrace(msgspec.Struct, frozen=True, kw_only=True):
    chunk: int
    labels: list[str]
    finished: bool
    tokens: list[TokenTrace]
    # The record's window this prompt read (0 for a document read whole).
    window: int = 0


class AuditRecord(msgspec.Struct, kw_only=True):
    """Every decoding step behind a record, on the audit topic, keyed by `doc_id` (audit enabled only)."""

    schema_version: int = SCHEMA_VERSION
    doc_id: str
    trace_id: str | None
    model: ModelInfo
    # Re-generations the validation loop asked for; the prompts below are the final attempt's.
    retries: int
    prompts: list[PromptTrace]
    processing: Processing


class ReviewDecision(msgspec.Struct, kw_only=True, tag="review_decision", tag_field="kind"):
    """What a reviewer decided on the review desk, on the audit topic beside the decode traces
    (`AuditRecord`, which has no `kind`), keyed by `DOC_ID#review@PARTITION:OFFSET` (so compaction keeps
    each decision and the document's trace, keyed by `doc_id`): every decision, rejections included."""

    schema_version: int = SCHEMA_VERSION
    doc_id: str
    reviewer: str
    decided_at: datetime
    action: Literal["accepted", "corrected", "rejected"]
    # A rejection's reason, in the reviewer's words.
    reason: str | None = None
    # The fields sent on (none for a rejection); `changed`: labels whose values the reviewer set.
    fields: dict[str, list[Span]] = msgspec.field(default_factory=dict)
    changed: list[str] = msgspec.field(default_factory=list)
    review_topic: str
    review_partition: int
    review_offset: int


MESSAGE_TYPES: dict[str, object] = {
    "raw_document": Annotated[RawDocument, msgspec.Meta(extra_json_schema=RAW_DOCUMENT_EITHER_LABELS_OR_FIELD_SET)],
    "field_record": FieldRecord,
    "review_record": ReviewRecord,
    "alert_record": AlertRecord,
    "dead_letter": DeadLetter,
    "audit_record": AuditRecord,
    "review_decision": ReviewDecision,
}
