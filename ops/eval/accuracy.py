"""`seqstream-ops eval`: the engine over a generated corpus, scored against its ground truth.

Values are compared after NFKC normalisation (full-width digits and punctuation fold to ASCII) and
whitespace removal, as sets per label; values of typed labels are compared by their normal form
where they have one, so `2024年3月5日` and `2024-03-05` are the same date. Predictions are the
grounded spans of every result, whether it is routed to fields or to review: the review record
carries them too. Values the engine rejected as not in the source never count as predictions;
they are counted on their own, and their share of every value written is the hallucination rate.

An output is valid when every prompt's answer parsed: one line per asked label, no unknown or
repeated label, finished within the generation limit.

What BI reads is the fields topic, so the records routed there are scored on their own: of the
values expected in fields-routed documents, the share wrong or missing (an expected value the record
does not hold exactly), and the values those records hold for labels the text has none for. Beside
them, the share of documents routed to fields and, per review code, how many documents carry it.

Scores are also given per length bucket (fields of documents up to 1k, 1-5k, 5-30k characters and
beyond), with the windows documents took (model/windows/split.py), spans whose offsets do not hold their
text and values a record reports twice: both must stay at zero.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec

from model.engine import Engine
from model.values.normalize import normalise as normal_form
from schemas.field_sets import FieldType
from schemas.messages import Document, Normalised, ReviewCode

Truth = Mapping[str, Mapping[str, Sequence[str]]]  # doc_id -> label -> values
# Upper bounds in characters, and the name of the bucket below each.
LENGTH_BUCKETS = [(1_000, "up to 1k"), (5_000, "1-5k"), (30_000, "5-30k"), (None, "over 30k")]
INVALID_OUTPUT = {
    ReviewCode.MALFORMED_OUTPUT,
    ReviewCode.UNKNOWN_LABEL,
    ReviewCode.DUPLICATE_LABEL,
    ReviewCode.INCOMPLETE_OUTPUT,
}


@dataclass
class FieldScore:
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    exact: int = 0
    documents: int = 0

    @property
    def precision(self) -> float:
        return _ratio(self.true_positives, self.true_positives + self.false_positives)

    @property
    def recall(self) -> float:
        return _ratio(self.true_positives, self.true_positives + self.false_negatives)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return _ratio(2 * p * r, p + r)

    @property
    def exact_match(self) -> float:
        return _ratio(self.exact, self.documents)


@dataclass
class AccuracyReport:
    documents: int = 0
    fields: dict[str, FieldScore] = field(default_factory=dict)
    # Per document kind (contract, resume ...): every field of its documents together.
    kinds: dict[str, FieldScore] = field(default_factory=dict)
    # Per length bucket (LENGTH_BUCKETS): every field of its documents, scored as the micro row.
    buckets: dict[str, FieldScore] = field(default_factory=dict)
    characters: int = 0
    windows: int = 0
    # Spans whose text is not the document's at their offsets; values reported twice for one label.
    misplaced_spans: int = 0
    repeated_values: int = 0
    valid_outputs: int = 0
    # Grounded values plus those rejected as not in the source: everything the engine wrote.
    written_values: int = 0
    to_fields: int = 0
    to_review: int = 0
    with_alarms: int = 0
    not_in_source: int = 0
    # In documents routed to fields: the values expected, those not held exactly, and values held
    # for a label the document has none for.
    fields_expected: int = 0
    fields_wrong_or_missing: int = 0
    fields_spurious: int = 0
    # Review code -> documents carrying it (a document may carry several).
    review_reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    # The lexicon backoff's time (LAC and candidate scoring, model/answers/backoff.py), in the batches' wall time.
    backoff_ms: float = 0.0

    @property
    def micro(self) -> FieldScore:
        total = FieldScore()
        for score in self.fields.values():
            _add(total, score)
        return total

    def as_dict(self) -> dict:
        def scores(s: FieldScore) -> dict:
            return asdict(s) | {"precision": s.precision, "recall": s.recall, "f1": s.f1, "exact_match": s.exact_match}

        return {
            "documents": self.documents,
            "fields": {label: scores(s) for label, s in sorted(self.fields.items())},
            "kinds": {kind: scores(s) for kind, s in sorted(self.kinds.items())},
            "buckets": {name: scores(self.buckets[name]) for _, name in LENGTH_BUCKETS if name in self.buckets},
            "micro": scores(self.micro),
            "windows_per_doc": _ratio(self.windows, self.documents),
            "misplaced_spans": self.misplaced_spans,
            "repeated_values": self.repeated_values,
            "fields_share": _ratio(self.to_fields, self.documents),
            "review_share": _ratio(self.to_review, self.documents),
            "fields_expected": self.fields_expected,
            "fields_wrong_or_missing": self.fields_wrong_or_missing,
            "fields_wrong_or_missing_share": _ratio(self.fields_wrong_or_missing, self.fields_expected),
            "fields_spurious": self.fields_spurious,
            "review_reasons": dict(sorted(self.review_reasons.items())),
            # Alerts are raised for documents with entropy alarms (streams/flow/routing.py).
            "alarm_share": _ratio(self.with_alarms, self.documents),
            "validity_rate": _ratio(self.valid_outputs, self.documents),
            "not_in_source_values": self.not_in_source,
            "written_values": self.written_values,
            "hallucination_rate": _ratio(self.not_in_source, self.written_values),
            "docs_per_s": _ratio(self.documents, self.seconds),
            "backoff_ms_per_doc": _ratio(self.backoff_ms, self.documents),
            "chars_per_s": _ratio(self.characters, self.seconds),
        }


def normalise(value: str, kind: FieldType | None = None) -> str:
    if kind is not None and isinstance(outcome := normal_form(kind, value), Normalised):
        # Unit and currency are part of the value: 5000 USD is not 5000 CNY.
        return msgspec.json.encode(outcome).decode()
    return "".join(unicodedata.normalize("NFKC", value).split())


def evaluate(
    engine: Engine, docs: Sequence[Document], truth: Truth, batch_size: int, kinds: Mapping[str, str] | None = None
) -> AccuracyReport:
    """`kinds`: doc_id -> document kind, for the per-kind scores (none without it)."""
    report = AccuracyReport()
    started = time.perf_counter()
    for start in range(0, len(docs), batch_size):
        batch = docs[start : start + batch_size]
        result = engine.extract(batch)
        report.backoff_ms += result.timings.backoff_ms
        for doc, extraction in zip(batch, result.extractions, strict=True):
            report.documents += 1
            report.to_review += extraction.needs_review
            report.to_fields += not extraction.needs_review
            report.with_alarms += bool(extraction.alarms)
            for code in {r.code.value for r in extraction.reasons}:
                report.review_reasons[code] = report.review_reasons.get(code, 0) + 1
            rejected = sum(r.code == ReviewCode.NOT_IN_SOURCE for r in extraction.reasons)
            report.not_in_source += rejected
            report.written_values += rejected + sum(len(spans) for spans in extraction.fields.values())
            report.valid_outputs += not any(r.code in INVALID_OUTPUT for r in extraction.reasons)
            report.characters += len(doc.text)
            report.windows += len(extraction.windows)
            expected = truth[doc.doc_id]
            document = FieldScore()
            bucket = report.buckets.setdefault(length_bucket(len(doc.text)), FieldScore())
            for label in doc.labels:
                kind = doc.field_types.get(label)
                spans = extraction.fields.get(label, [])
                report.misplaced_spans += sum(doc.text[s.start : s.end] != s.text for s in spans)
                got = {normalise(span.text, kind) for span in spans}
                report.repeated_values += len(spans) - len(got)
                want = {normalise(v, kind) for v in expected.get(label, [])}
                _score(report.fields.setdefault(label, FieldScore()), got, want)
                _score(bucket, got, want)
                _score(document, got, want)
                if not extraction.needs_review:
                    report.fields_expected += len(want)
                    report.fields_wrong_or_missing += len(want - got)
                    report.fields_spurious += 0 if want else len(got)
            if kinds:
                # A kind's exact match is per document: every one of its fields right.
                document.exact, document.documents = int(document.exact == document.documents), 1
                _add(report.kinds.setdefault(kinds[doc.doc_id], FieldScore()), document)
    report.seconds = time.perf_counter() - started
    return report


def length_bucket(characters: int) -> str:
    return next(name for bound, name in LENGTH_BUCKETS if bound is None or characters <= bound)


def evaluate_file(engine: Engine, path: Path, batch_size: int) -> AccuracyReport:
    """A corpus file written by `seqstream-ops corpus generate`, with its ground-truth sidecar."""
    docs, truth, kinds = read_corpus(path)
    return evaluate(engine, docs, truth, batch_size, kinds)


def read_corpus(path: Path) -> tuple[list[Document], Truth, dict[str, str]]:
    """The documents of a corpus file, their ground truth and their kinds."""
    from ops.corpus.generate import read_kinds, read_truth
    from schemas.decode import decode_document

    docs = [decode_document(line, 1 << 24) for line in path.read_bytes().splitlines() if line.strip()]
    return docs, read_truth(path), read_kinds(path)


def _score(score: FieldScore, got: set[str], want: set[str]) -> None:
    score.documents += 1
    score.exact += got == want
    score.true_positives += len(got & want)
    score.false_positives += len(got - want)
    score.false_negatives += len(want - got)


def _add(total: FieldScore, score: FieldScore) -> None:
    for name in ("true_positives", "false_positives", "false_negatives", "exact", "documents"):
        setattr(total, name, getattr(total, name) + getattr(score, name))


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0
