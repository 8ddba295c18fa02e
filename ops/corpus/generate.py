"""Seeded corpora of generated documents with ground truth, and their JSONL files.

Each document has its own seed derived from the corpus seed and its index, and Faker is re-seeded
with it, so document i is the same whatever the count and whichever others are generated.

Files: `FILE.jsonl` holds `RawDocument` lines only, so `seqstream produce` and `seqstream extract`
take it as it is; the ground truth goes to the sidecar `FILE.truth.jsonl`, one line per document
(`doc_id`, `kind`, `ground_truth`: label -> [{text, start, end}], an empty list for a missing field).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from faker import Faker

from ops.corpus.builder import DocumentBuilder, TruthSpan
from ops.corpus.contract import contract
from ops.corpus.free import free_document
from ops.corpus.hiring import job_ad, resume
from ops.corpus.long import FLATTENED_SHARE, LONG_KINDS, flattened, long_length
from ops.corpus.noise import ocr_noise
from ops.corpus.open_layouts import open_document
from ops.corpus.reports import medical, news
from schemas.field_sets import FIELD_SETS

Kind = Callable[[Faker, random.Random, DocumentBuilder, int], None]
KINDS: dict[str, Kind] = {"contract": contract, "job_ad": job_ad, "resume": resume, "news": news, "medical": medical}
MIN_CHARS, MAX_CHARS = 300, 1200


@dataclass(frozen=True)
class GeneratedDocument:
    doc_id: str
    kind: str
    text: str
    truth: dict[str, list[TruthSpan]]

    def raw(self) -> dict:
        """The `RawDocument` message for this document."""
        return {"doc_id": self.doc_id, "text": self.text, "field_set": self.kind}

    def values(self) -> dict[str, list[str]]:
        return {label: [span.text for span in spans] for label, spans in self.truth.items()}

    def truth_line(self) -> dict:
        truth = {label: [asdict(span) for span in spans] for label, spans in self.truth.items()}
        return {"doc_id": self.doc_id, "kind": self.kind, "ground_truth": truth}


def document_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def generate_document(
    kind: str,
    seed: int,
    index: int,
    noise: float = 0.0,
    *,
    brief: bool = False,
    long: bool = False,
    chars: int | None = None,
    free: bool = False,
    open_vocab: bool = False,
) -> GeneratedDocument:
    """Document `index` of the corpus `seed`. `brief` leaves out the boilerplate: ~100-300
    characters with the same values, for models that must learn them quickly (test fixtures).
    `long`: 3,000-30,000 characters (about `chars`, when given), a kind of `LONG_KINDS` (ops/corpus/long.py).
    `free`: free phrasing (ops/corpus/free.py), brief or with a few fillers.
    `open_vocab`: values built from parts in many layouts (ops/corpus/open_layouts.py)."""
    doc_seed = document_seed(seed, index)
    rng = random.Random(doc_seed)
    fake = Faker("zh_CN")
    fake.seed_instance(doc_seed)
    builder = DocumentBuilder(FIELD_SETS[kind], noise=ocr_noise(random.Random(doc_seed ^ 0x5EED), noise))
    if long:
        if rng.random() < FLATTENED_SHARE:
            builder.noise = flattened(builder.noise)
        LONG_KINDS[kind](fake, rng, builder, chars or long_length(rng))
    elif open_vocab:
        open_document(kind, fake, rng, builder, 0)
    elif free:
        free_document(kind, fake, rng, builder, 0 if brief else 1)
    else:
        KINDS[kind](fake, rng, builder, 0 if brief else rng.randrange(MIN_CHARS + 100, MAX_CHARS - 80))
    text, truth = builder.build()
    prefix = "long-" if long else "open-" if open_vocab else "free-" if free else ""
    return GeneratedDocument(doc_id=f"{prefix}{kind}-{seed}-{index:05d}", kind=kind, text=text, truth=truth)


def generate_corpus(
    count: int, seed: int, noise: float = 0.0, *, brief: bool = False, long: bool = False
) -> Iterator[GeneratedDocument]:
    """`count` documents cycling through the kinds, so every kind is present from five on (three, long)."""
    names = sorted(LONG_KINDS if long else KINDS)
    for index in range(count):
        yield generate_document(names[index % len(names)], seed, index, noise, brief=brief, long=long)


def truth_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".jsonl") + ".truth.jsonl")


def write_corpus(path: Path, documents: Iterator[GeneratedDocument]) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as raw, truth_path(path).open("w", encoding="utf-8") as truth:
        for doc in documents:
            raw.write(json.dumps(doc.raw(), ensure_ascii=False) + "\n")
            truth.write(json.dumps(doc.truth_line(), ensure_ascii=False) + "\n")
            count += 1
    return count


def read_kinds(path: Path) -> dict[str, str]:
    """doc_id -> document kind, from a corpus file's sidecar."""
    lines = truth_path(path).read_text(encoding="utf-8").splitlines()
    return {entry["doc_id"]: entry["kind"] for entry in map(json.loads, filter(str.strip, lines))}


def read_truth(path: Path) -> dict[str, dict[str, list[str]]]:
    """doc_id -> label -> values, from a corpus file's sidecar."""
    out = {}
    for line in truth_path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            out[entry["doc_id"]] = {label: [s["text"] for s in spans] for label, spans in entry["ground_truth"].items()}
    return out


def read_documents(path: Path) -> list[GeneratedDocument]:
    """A corpus file and its sidecar back as labelled documents (e.g. `corpus from-reviews`' output)."""
    texts = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            texts[raw["doc_id"]] = raw["text"]
    out = []
    for line in truth_path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            truth = {label: [TruthSpan(**s) for s in spans] for label, spans in entry["ground_truth"].items()}
            out.append(GeneratedDocument(entry["doc_id"], entry["kind"], texts[entry["doc_id"]], truth))
    return out
