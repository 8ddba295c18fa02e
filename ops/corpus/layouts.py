"""The hand-written corpora marked in place: layouts.txt (the second) and mixed.txt (the third).

The first hand-written corpus (freeform.jsonl) is prose, written as plain sentences and annotated
afterwards with offsets. The others are written with their values marked where they stand,
`{label:value}`, so the truth's offsets hold by construction and a reader sees the truth in place;
their values are chosen by hand (none from the generator's lists).

- layouts.txt: the shapes text takes before anyone tidies it: forms and boxed tables, tables
  flattened to pipes and tabs, chat and group messages, e-mail signatures and business cards,
  English labels, and OCR line breaks inside words and values.
- mixed.txt: the shapes the first two lack: mixed Chinese-English names and companies, addresses
  with building and room numbers, several people or companies for one label, dates and amounts
  written in words, and OCR-broken lines (a value split by a line break, stray spaces, full- and
  half-width characters mixed).

`python -m ops.corpus.layouts` writes each source's .jsonl and .truth.jsonl beside it; a test checks
the files are that output. They are never trained or tuned on: they are scored only at the end,
beside the free-phrasing corpus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from schemas.field_sets import FIELD_SETS

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "layouts.txt"
CORPUS = SOURCE.with_suffix(".jsonl")
MIXED_SOURCE = HERE / "mixed.txt"
MIXED_CORPUS = MIXED_SOURCE.with_suffix(".jsonl")
SOURCES = (SOURCE, MIXED_SOURCE)
HEADER = re.compile(r"^=== (\S+) (\S+)$", re.MULTILINE)
MARK = re.compile(r"\{([^{}:]+):([^{}]+)\}")


def parse(source: str) -> list[tuple[str, str, str, dict[str, list[dict]]]]:
    """(doc_id, kind, text, truth) per document of the marked-up source."""
    parts = HEADER.split(source)
    documents = []
    for doc_id, kind, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        truth: dict[str, list[dict]] = {label: [] for label in FIELD_SETS[kind]}  # type: ignore[index]
        text, position = [], 0
        for match in MARK.finditer(body := body.strip("\n")):
            text.append(body[position : match.start()])
            label, value = match.groups()
            if label not in truth:
                raise ValueError(f"{doc_id}: {label!r} is not a label of {kind}")
            start = sum(map(len, text))
            truth[label].append({"text": value, "start": start, "end": start + len(value)})
            text.append(value)
            position = match.end()
        text.append(body[position:])
        documents.append((doc_id, kind, "".join(text), truth))
    return documents


def lines(source: Path = SOURCE) -> tuple[list[str], list[str]]:
    """The corpus file's lines and its truth sidecar's, as `seqstream-ops corpus generate` writes them."""
    raw, truth = [], []
    for doc_id, kind, text, spans in parse(source.read_text(encoding="utf-8")):
        raw.append(json.dumps({"doc_id": doc_id, "text": text, "field_set": kind}, ensure_ascii=False))
        truth.append(json.dumps({"doc_id": doc_id, "kind": kind, "ground_truth": spans}, ensure_ascii=False))
    return raw, truth


def main() -> None:
    from ops.corpus.generate import truth_path

    for source in SOURCES:
        raw, truth = lines(source)
        corpus = source.with_suffix(".jsonl")
        corpus.write_text("\n".join(raw) + "\n", encoding="utf-8")
        truth_path(corpus).write_text("\n".join(truth) + "\n", encoding="utf-8")
        print(f"wrote {len(raw)} documents to {corpus} and their truth to {truth_path(corpus)}")


if __name__ == "__main__":
    main()
