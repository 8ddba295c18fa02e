"""`seqstream-ops eval`'s table: the product's decoding beside its baselines, on the same corpus.

Columns: the product (the engine as configured), the same engine reading only the head of a
document longer than the model's window (what it did before windows: `fit_text`), the same model
decoded without the decoding constraint, the rule system the product replaces (ops/eval/baseline.py)
the lexicon NER a user would try first for names and the LAC script (ops/eval/lexicon.py), and the
product with the LAC script's values where it answered None (ops/eval/peers.py). Rows: P/R/F1 and
exact match per field, per document kind and per length bucket, then the routing and validity
rates, what the fields-routed records got wrong, documents per review code, the span checks and
the throughput.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from model.config import EngineSettings
from model.engine import Engine
from model.windows.engine import WindowedEngine
from ops.eval.accuracy import LENGTH_BUCKETS, AccuracyReport, FieldScore, evaluate, read_corpus
from ops.eval.baseline import RuleEngine
from ops.eval.lexicon import LacEngine, LexiconEngine
from ops.eval.peers import ElseEngine, Remembered

PRODUCT, HEAD_ONLY, UNCONSTRAINED = "product", "head only", "unconstrained"
BASELINE, LEXICON, LAC, PRODUCT_ELSE_LAC = "regex baseline", "lexicon NER", "LAC script", "product else LAC"
SCORES = ("P", "R", "F1", "EM")
COLUMN = 6
NAME_WIDTH = 12
# The peers summary (`format_summary`): values found (micro recall over every value the corpus
# marks), documents routed to fields, the share of values expected in fields-routed records that
# those records do not hold exactly, documents routed to review.
SUMMARY = ("found", "to fields", "wrong/miss in fields", "to review")
RATES = [
    ("valid output", "validity_rate", "{:.1%}"),
    ("hallucination", "hallucination_rate", "{:.1%}"),
    ("to fields", "fields_share", "{:.1%}"),
    ("to review", "review_share", "{:.1%}"),
    ("fields wrong/miss", "fields_wrong_or_missing_share", "{:.1%}"),
    ("  of expected", "fields_expected", "{:d}"),
    ("fields spurious", "fields_spurious", "{:d}"),
    ("alerts", "alarm_share", "{:.1%}"),
    ("windows/doc", "windows_per_doc", "{:.2f}"),
    ("spans off text", "misplaced_spans", "{:d}"),
    ("values twice", "repeated_values", "{:d}"),
    ("docs/s", "docs_per_s", "{:.2f}"),
    ("backoff ms/doc", "backoff_ms_per_doc", "{:.1f}"),
    ("chars/s", "chars_per_s", "{:.0f}"),
]


def systems(
    settings: EngineSettings, build: Callable[[EngineSettings], Engine], names: Sequence[str] | None = None
) -> list[tuple[str, Engine]]:
    """The engines to compare (`names`, default all), each built by `build` from its settings (the
    baseline needs no model; the head-only column is the product's engine without its windows)."""
    built = build(settings)
    head_only = built.inner if isinstance(built, WindowedEngine) else built
    # Decoded once, read by two columns.
    product = Remembered(built)
    wanted = [
        (PRODUCT, lambda: product),
        (HEAD_ONLY, lambda: head_only),
        (UNCONSTRAINED, lambda: build(msgspec.structs.replace(settings, constrained=False))),
        (BASELINE, lambda: RuleEngine(settings)),
        (LEXICON, lambda: LexiconEngine(settings)),
        (LAC, lambda: LacEngine(settings)),
        (PRODUCT_ELSE_LAC, lambda: ElseEngine(product, LacEngine(settings))),
    ]
    return [(name, make()) for name, make in wanted if names is None or name in names]


def baselines(settings: EngineSettings, build: Callable[[EngineSettings], Engine]) -> list[tuple[str, Engine]]:
    unconstrained = build(msgspec.structs.replace(settings, constrained=False))
    return [(UNCONSTRAINED, unconstrained), (BASELINE, RuleEngine(settings)), (LEXICON, LexiconEngine(settings))]


def compare(engines: Sequence[tuple[str, Engine]], path: Path, batch_size: int) -> dict[str, AccuracyReport]:
    docs, truth, kinds = read_corpus(path)
    return {name: evaluate(engine, docs, truth, batch_size, kinds) for name, engine in engines}


def as_json(reports: dict[str, AccuracyReport], path: Path) -> dict:
    return {"data": str(path), "systems": {name: r.as_dict() for name, r in reports.items()}}


def format_table(reports: dict[str, AccuracyReport]) -> str:
    names = list(reports)
    block = COLUMN * len(SCORES)
    lines = [_pad("", NAME_WIDTH + COLUMN) + "".join(f" | {_pad(n, block)}" for n in names)]
    lines.append(_pad("field", NAME_WIDTH) + f"{'docs':>{COLUMN}}" + _score_header(len(names)))
    first = next(iter(reports.values()))
    for label in sorted(first.fields):
        lines.append(_row(label, [r.fields[label] for r in reports.values()]))
    lines.append(_row("micro", [r.micro for r in reports.values()]))
    if first.kinds:
        lines.append("")
        lines.append(_pad("kind", NAME_WIDTH) + f"{'docs':>{COLUMN}}" + _score_header(len(names)))
        for kind in sorted(first.kinds):
            lines.append(_row(kind, [r.kinds[kind] for r in reports.values()]))
        lines.append("(a kind's EM: documents with every field right)")
    lines.append("")
    lines.append(_pad("length", NAME_WIDTH) + f"{'fields':>{COLUMN}}" + _score_header(len(names)))
    for _, bucket in LENGTH_BUCKETS:
        if bucket in first.buckets:
            lines.append(_row(bucket, [r.buckets[bucket] for r in reports.values()]))
    lines.append("")
    tables = {name: r.as_dict() for name, r in reports.items()}
    for title, key, form in RATES:
        values = "".join(f" | {form.format(t[key]):>{block}}" for t in tables.values())
        lines.append(_pad(title, NAME_WIDTH + COLUMN) + values)
    codes = sorted({code for t in tables.values() for code in t["review_reasons"]})
    if codes:
        lines.append("review reasons (documents)")
    for code in codes:
        values = "".join(f" | {t['review_reasons'].get(code, 0):>{block}d}" for t in tables.values())
        lines.append(_pad(code, NAME_WIDTH + COLUMN) + values)
    lines.append(
        "(fields wrong/miss: of the values expected in documents routed to fields, the share their records"
        " do not hold exactly; spurious: values they hold for labels the text has none for)"
    )
    lines.append(f"documents: {first.documents}")
    return "\n".join(lines)


def summary_row(report: AccuracyReport) -> tuple[float, float, float, float]:
    table = report.as_dict()
    return (
        table["micro"]["recall"],
        table["fields_share"],
        table["fields_wrong_or_missing_share"],
        table["review_share"],
    )


def format_summary(by_corpus: dict[str, dict[str, AccuracyReport]]) -> str:
    """Per corpus, one row per system with the SUMMARY columns."""
    width = max(len(name) for reports in by_corpus.values() for name in reports) + 2
    lines = []
    for corpus, reports in by_corpus.items():
        documents = next(iter(reports.values())).documents
        lines.append(f"{corpus} ({documents} documents)")
        lines.append(" " * width + "".join(f"{c:>22}" for c in SUMMARY))
        for name, report in reports.items():
            found, fields, wrong, review = summary_row(report)
            fields_docs, review_docs = report.to_fields, report.to_review
            cells = (
                f"{found:.1%} of {report.micro.true_positives + report.micro.false_negatives}",
                f"{fields:.1%} ({fields_docs})",
                f"{wrong:.1%} of {report.fields_expected}",
                f"{review:.1%} ({review_docs})",
            )
            lines.append(_pad(name, width) + "".join(f"{c:>22}" for c in cells))
        lines.append("")
    return "\n".join(lines).rstrip()


def _score_header(systems: int) -> str:
    return "".join(" | " + "".join(f"{s:>{COLUMN}}" for s in SCORES) for _ in range(systems))


def _row(name: str, scores: list[FieldScore]) -> str:
    cells = "".join(
        " | " + "".join(f"{v:{COLUMN}.3f}" for v in (s.precision, s.recall, s.f1, s.exact_match)) for s in scores
    )
    return _pad(name, NAME_WIDTH) + f"{scores[0].documents:{COLUMN}d}" + cells


def _pad(text: str, width: int) -> str:
    """Left-aligned in `width` terminal columns: CJK characters take two."""
    used = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(0, width - used)
