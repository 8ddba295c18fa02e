"""Documents prepared in processes beside the engine's (model/prepare_pool.py) give the records one
process gives, share the engine's chunk tables, and a dead process costs no document."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path

import msgspec
import pytest

from model.answers.words import words_of
from model.build import build_engine
from model.config import EngineSettings
from model.engine import Extractor, prepare
from model.prepare_pool import PreparePool, _shares
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from ops.demo.samples import sample_documents
from schemas.decode import decode_document
from schemas.messages import Document

DEMO = "model/demo"
# Every share is sent, however little text it holds: these documents are short.
POOLED = EngineSettings(path=DEMO, prepare_processes=1, prepare_share_chars=1)


def documents() -> list[Document]:
    """Generated documents, and hand-written ones the demo model revisits and backs off on."""
    raws = [{**raw, "doc_id": f"g{i}"} for i, (raw, _) in enumerate(sample_documents(10, seed=5))]
    lines = Path("ops/corpus/freeform.jsonl").read_text().splitlines()[:6]
    raws += [{**json.loads(line), "doc_id": f"f{i}"} for i, line in enumerate(lines)]
    return [decode_document(msgspec.json.encode(raw), 1 << 20) for raw in raws]


def records(engine, docs: list[Document]) -> list[bytes]:
    out = []
    for start in range(0, len(docs), 8):
        for e in engine.extract(docs[start : start + 8]).extractions:
            record = dataclasses.asdict(e)
            record.pop("timings", None)
            out.append(msgspec.json.encode(record))
    return out


def test_records_with_a_preparing_process_are_those_of_one_process() -> None:
    docs = documents()
    alone = records(build_engine(EngineSettings(path=DEMO)), docs)
    words_of.cache_clear()
    pooled = records(build_engine(POOLED), docs)
    assert pooled == alone


def test_a_batch_prepared_in_shares_shares_the_engines_tables() -> None:
    settings = POOLED
    runner = FastRunner(load_model(settings), settings)
    docs = documents()[:10]
    with PreparePool(settings, runner.tokenizer, 1) as pool:
        words_of.cache_clear()
        shared = pool.prepare(runner, docs)
    alone = prepare(FastRunner(load_model(settings), settings), docs)
    assert [p.encoded for p in shared] == [p.encoded for p in alone]
    # The share the process prepared: its documents' words known here, their tables the engine's.
    far = shared[len(docs) // 2 :]
    assert all(words_of.get(p.encoded.text) is not None for p in far)
    chunks = {id(row.chunk) for p in shared for row in p.grammars or []}
    assert len(chunks) == len({row.chunk.labels for p in shared for row in p.grammars or []})
    for p in far:
        again = runner.constrainer.rows(p.encoded.text, p.encoded.chunks)
        assert [r.source for r in again] == [r.source for r in p.grammars or []]  # kept, not rebuilt


def test_a_dead_preparing_process_costs_no_document(caplog: pytest.LogCaptureFixture) -> None:
    settings = POOLED
    runner = FastRunner(load_model(settings), settings)
    docs = documents()[:8]
    pool = PreparePool(settings, runner.tokenizer, 1)
    engine = Extractor(runner, pool.prepare)
    expected = [msgspec.json.encode(dataclasses.asdict(e)) for e in Extractor(runner).extract(docs).extractions]
    assert pool._pool is not None
    for process in list(pool._pool._processes.values()):
        os.kill(process.pid, signal.SIGKILL)
    got = [msgspec.json.encode(dataclasses.asdict(e)) for e in engine.extract(docs).extractions]
    strip = [json.loads(r) | {"timings": None} for r in expected]
    assert [json.loads(r) | {"timings": None} for r in got] == strip
    assert "a preparing process died" in caplog.text
    assert pool._pool is None  # closed: later batches are prepared in the engine's process


def test_the_number_of_processes_and_the_least_share_are_checked_at_the_edge() -> None:
    with pytest.raises(msgspec.ValidationError, match="prepare_processes"):
        msgspec.convert({"prepare_processes": -1}, EngineSettings)
    with pytest.raises(msgspec.ValidationError, match="prepare_share_chars"):
        msgspec.convert({"prepare_share_chars": 0}, EngineSettings)


@pytest.mark.parametrize(
    ("sizes", "parts", "expected"),
    [
        ([1] * 64, 2, [(0, 32), (32, 64)]),
        ([10, 1, 1, 1, 1, 10], 3, [(0, 1), (1, 5), (5, 6)]),  # by text, not by count
        ([100, 1, 1], 2, [(0, 1), (1, 3)]),
        ([5], 3, [(0, 1)]),  # never an empty share
        ([], 3, [(0, 0)]),
    ],
)
def test_a_batch_is_cut_into_contiguous_shares_of_about_equal_text(sizes, parts, expected) -> None:
    assert _shares(sizes, parts) == expected


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ([650, 650], [(0, 2)]),  # too little text for a trip to another process
        ([650] * 4, [(0, 2), (2, 4)]),
        ([650] * 5, [(0, 3), (3, 5)]),
        ([650] * 9, [(0, 3), (3, 6), (6, 9)]),  # as many shares as the text fills
    ],
)
def test_no_share_is_smaller_than_the_least_worth_sending(sizes, expected) -> None:
    assert _shares(sizes, 3, 1300) == expected
