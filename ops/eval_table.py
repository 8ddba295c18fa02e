"""`seqstream eval`'s table: the product's decoding beside its baselines, on the same corpus.

Columns: the product (the engine as configured), the same model decoded without the decoding
constraint, and the rule system the product replaces (ops/baseline.py). Rows: P/R/F1 and exact
match per field and per document kind, then the routing and validity rates and the throughput.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from model.config import EngineSettings
from model.engine import Engine
from ops.accuracy import AccuracyReport, FieldScore, evaluate, read_corpus
from ops.baseline import RuleEngine

PRODUCT, UNCONSTRAINED, BASELINE = "product", "unconstrained", "regex baseline"
SCORES = ("P", "R", "F1", "EM")
COLUMN = 6
NAME_WIDTH = 12
RATES = [
    ("valid output", "validity_rate", "{:.1%}"),
    ("hallucination", "hallucination_rate", "{:.1%}"),
    ("to review", "review_share", "{:.1%}"),
    ("alerts", "alarm_share", "{:.1%}"),
    ("docs/s", "docs_per_s", "{:.2f}"),
]


def systems(settings: EngineSettings, build: Callable[[EngineSettings], Engine]) -> list[tuple[str, Engine]]:
    """The engines to compare, each built by `build` from its settings (the baseline needs no model)."""
    return [(PRODUCT, build(settings)), *baselines(settings, build)]


def baselines(settings: EngineSettings, build: Callable[[EngineSettings], Engine]) -> list[tuple[str, Engine]]:
    unconstrained = build(msgspec.structs.replace(settings, constrained=False))
    return [(UNCONSTRAINED, unconstrained), (BASELINE, RuleEngine(settings))]


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
    tables = {name: r.as_dict() for name, r in reports.items()}
    for title, key, form in RATES:
        values = "".join(f" | {form.format(t[key]):>{block}}" for t in tables.values())
        lines.append(_pad(title, NAME_WIDTH + COLUMN) + values)
    lines.append(f"documents: {first.documents}")
    return "\n".join(lines)


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
