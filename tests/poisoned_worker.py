"""`seqstream worker` with an engine that raises whenever a document whose doc_id ends in "poison"
is in its batch, the real engine otherwise: the fault a CUDA assert or a tokenizer bug would cause.

    python -m tests.poisoned_worker worker
"""

from __future__ import annotations

import time

import model.build
from model.config import EngineSettings
from model.engine import BatchResult, Engine, Extractor, PreparedBatch
from model.runner.reference import ReferenceRunner


class PoisonedEngine(Extractor):
    """The real engine, made to raise whenever one particular document is in its batch."""

    def run(self, batch: PreparedBatch) -> BatchResult:
        # In `run`, where the device works: `extract` is run(prepare(...)), and a worker that
        # prepared the batch ahead calls `run` alone.
        if any(d.doc_id.endswith("poison") for d in batch.docs):
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().run(batch)


class HangingEngine(Extractor):
    """The real engine, stalled for `hang_s` whenever a document whose doc_id ends in "hang" is in its
    batch: a document the engine takes far too long over, as a runaway decode or a stuck kernel would."""

    hang_s = 3.0

    def run(self, batch: PreparedBatch) -> BatchResult:
        if any(d.doc_id.endswith("hang") for d in batch.docs):
            time.sleep(self.hang_s)
        return super().run(batch)


def build_poisoned_engine(settings: EngineSettings, windows: object = None) -> Engine:
    from model.runner.loading import load_model

    return PoisonedEngine(ReferenceRunner(load_model(settings), settings))


if __name__ == "__main__":
    # The CLI imports build_engine when the worker starts, so this replacement is what it finds.
    model.build.build_engine = build_poisoned_engine
    from streams.cli.main import main

    main()
