"""`seqstream eval`: the engine over a generated corpus, scored against its ground truth.

Values are compared after NFKC normalisation (full-width digits and punctuation fold to ASCII) and
whitespace removal, as sets per label; values of typed labels are compared by their normal form
where they have one, so `2024年3月5日` and `2024-03-05` are the same date. Predictions are the
grounded spans of every result, whether it is routed to fields or to review: the review record
carries them too. Values the engine rejected as not in the source never count as predictions;
they are counted on their own.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec

from model.engine import Engine
from model.normalize import normalise as normal_form
from schemas.field_sets import FieldType
from schemas.messages import Document, Normalised, ReviewCode

Truth = Mapping[str, Mapping[str, Sequence[str]]]  # doc_id -> label -> values


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
    to_fields: int = 0
    to_review: int = 0
    with_alarms: int = 0
    not_in_source: int = 0
    seconds: float = 0.0

    @property
    def micro(self) -> FieldScore:
        total = FieldScore()
        for score in self.fields.values():
            for name in ("true_positives", "false_positives", "false_negatives", "exact", "documents"):
                setattr(total, name, getattr(total, name) + getattr(score, name))
        return total

    def as_dict(self) -> dict:
        def scores(s: FieldScore) -> dict:
            return asdict(s) | {"precision": s.precision, "recall": s.recall, "f1": s.f1, "exact_match": s.exact_match}

        return {
            "documents": self.documents,
            "fields": {label: scores(s) for label, s in sorted(self.fields.items())},
            "micro": scores(self.micro),
            "fields_share": _ratio(self.to_fields, self.documents),
            "review_share": _ratio(self.to_review, self.documents),
            "alarm_share": _ratio(self.with_alarms, self.documents),
            "not_in_source_values": self.not_in_source,
            "docs_per_s": _ratio(self.documents, self.seconds),
        }


def normalise(value: str, kind: FieldType | None = None) -> str:
    if kind is not None and isinstance(outcome := normal_form(kind, value), Normalised):
        # Unit and currency are part of the value: 5000 USD is not 5000 CNY.
        return msgspec.json.encode(outcome).decode()
    return "".join(unicodedata.normalize("NFKC", value).split())


def evaluate(engine: Engine, docs: Sequence[Document], truth: Truth, batch_size: int) -> AccuracyReport:
    report = AccuracyReport()
    started = time.perf_counter()
    for start in range(0, len(docs), batch_size):
        batch = docs[start : start + batch_size]
        for doc, extraction in zip(batch, engine.extract(batch).extractions, strict=True):
            report.documents += 1
            report.to_review += extraction.needs_review
            report.to_fields += not extraction.needs_review
            report.with_alarms += bool(extraction.alarms)
            report.not_in_source += sum(r.code == ReviewCode.NOT_IN_SOURCE for r in extraction.reasons)
            expected = truth[doc.doc_id]
            for label in doc.labels:
                kind = doc.field_types.get(label)
                got = {normalise(span.text, kind) for span in extraction.fields.get(label, [])}
                want = {normalise(v, kind) for v in expected.get(label, [])}
                _score(report.fields.setdefault(label, FieldScore()), got, want)
    report.seconds = time.perf_counter() - started
    return report


def evaluate_file(engine: Engine, path: Path, batch_size: int) -> AccuracyReport:
    """A corpus file written by `seqstream corpus generate`, with its ground-truth sidecar."""
    from ops.corpus.generate import read_truth
    from schemas.decode import decode_document

    docs = [decode_document(line, 1 << 24) for line in path.read_bytes().splitlines() if line.strip()]
    return evaluate(engine, docs, read_truth(path), batch_size)


def _score(score: FieldScore, got: set[str], want: set[str]) -> None:
    score.documents += 1
    score.exact += got == want
    score.true_positives += len(got & want)
    score.false_positives += len(got - want)
    score.false_negatives += len(want - got)


def format_report(report: AccuracyReport) -> str:
    lines = [f"{'field':10} {'docs':>5} {'prec':>6} {'recall':>6} {'f1':>6} {'exact':>6}"]
    for label, s in sorted(report.fields.items(), key=lambda item: item[0]):
        lines.append(f"{label:10} {s.documents:5d} {s.precision:6.3f} {s.recall:6.3f} {s.f1:6.3f} {s.exact_match:6.3f}")
    m = report.micro
    lines.append(f"{'micro':10} {m.documents:5d} {m.precision:6.3f} {m.recall:6.3f} {m.f1:6.3f} {m.exact_match:6.3f}")
    d = report.as_dict()
    lines.append(
        f"documents {report.documents}: fields {d['fields_share']:.1%}, review {d['review_share']:.1%}, "
        f"with entropy alarms {d['alarm_share']:.1%}; values rejected as not in source: {report.not_in_source}; "
        f"{d['docs_per_s']:.2f} docs/s"
    )
    return "\n".join(lines)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0
