"""The product beside the peers a user would weigh it against, on the hand-written corpora.

"product else LAC": the product's values, and the LAC script's (ops/eval/lexicon.py) for the labels
the product answered `None`, routed as the product routed the document: what a user who runs both
gets. The product's batch is decoded once and shared by both columns (`Remembered`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

from model.engine import BatchResult, Engine
from ops.eval.baseline import RuleEngine
from schemas.messages import Document, Span

CORPUS_DIR = Path(__file__).resolve().parent.parent / "corpus"


def hand_written_corpora(directory: Path = CORPUS_DIR) -> list[Path]:
    """Every corpus file in ops/corpus with a ground-truth sidecar: the hand-written ones (relative to
    the working directory where they are under it, as a user would type them)."""
    found = [p for p in directory.glob("*.jsonl") if not p.name.endswith(".truth.jsonl") and truth_of(p).is_file()]
    return sorted(p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p for p in found)


def truth_of(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".jsonl") + ".truth.jsonl")


class Remembered:
    """An engine whose results are kept per batch of documents, so two columns share one decode."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.info = engine.info
        self._kept: dict[tuple[str, ...], BatchResult] = {}

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        key = tuple(f"{d.doc_id}\0{d.text}" for d in docs)
        if key not in self._kept:
            self._kept[key] = self.engine.extract(docs)
        return copy.deepcopy(self._kept[key])


class ElseEngine:
    """`first`'s values and routing; `second`'s values for the labels `first` left empty."""

    def __init__(self, first: Engine, second: RuleEngine) -> None:
        self.first, self.second = first, second
        self.info = first.info

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        result = self.first.extract(docs)
        for doc, extraction in zip(docs, result.extractions, strict=True):
            for label, spans in self.second.find(doc).items():
                if spans and not extraction.fields.get(label):
                    extraction.fields[label] = [
                        Span(text=doc.text[a:b], start=a, end=b, confidence=0.0, margin=0.0) for a, b in spans
                    ]
        return result
