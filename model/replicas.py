"""One engine replica per device, and a micro-batch shared out among them.

The worker keeps one micro-batch in flight (its offsets are acknowledged only once every output is
written), so several GPUs are used by splitting that batch: each replica takes a share balanced by
prompt tokens, all run at once, and the results come back in the batch's order. With batch
invariance (model/runner/fast.py), how a batch is split does not change any document's output.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import msgspec
import torch

from model.answers.validate import Extraction
from model.engine import BatchResult, Engine
from model.runner.protocol import Passes
from schemas.messages import Document, Timings


def visible_devices(spec: str) -> list[str]:
    """`auto`: every visible CUDA device (CUDA_VISIBLE_DEVICES decides which), else the CPU;
    or an explicit comma-separated list such as `cuda:0,cuda:1`."""
    if spec != "auto":
        return [d.strip() for d in spec.split(",") if d.strip()]
    if torch.cuda.is_available():
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return ["cpu"]


class ReplicaPool:
    def __init__(self, engines: Sequence[Engine]) -> None:
        self.engines = list(engines)
        first = self.engines[0].info
        devices = ",".join(e.info.device for e in self.engines)
        self.info = msgspec.structs.replace(first, device=devices)
        self._threads = ThreadPoolExecutor(max_workers=len(self.engines), thread_name_prefix="replica")

    def extract(self, docs: Sequence[Document]) -> BatchResult:
        shares = split_by_load(docs, len(self.engines))
        futures = [
            self._threads.submit(engine.extract, [docs[i] for i in share])
            for engine, share in zip(self.engines, shares, strict=True)
            if share
        ]
        results = [f.result() for f in futures]
        extractions: list[Extraction | None] = [None] * len(docs)
        for share, result in zip([s for s in shares if s], results, strict=True):
            for index, extraction in zip(share, result.extractions, strict=True):
                extractions[index] = extraction
        timings = Timings()
        for name in Timings.__struct_fields__:
            # Replicas run side by side: a stage takes as long as its slowest replica.
            setattr(timings, name, max(getattr(r.timings, name) for r in results))
        return BatchResult(
            extractions=[e for e in extractions if e is not None],
            timings=timings,
            generated_tokens=sum(r.generated_tokens for r in results),
            passes=sum((r.passes for r in results), Passes()),
        )


def split_by_load(docs: Sequence[Document], parts: int) -> list[list[int]]:
    """Document indices per replica: longest first, each to the replica with the least text so far."""
    shares: list[list[int]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for index in sorted(range(len(docs)), key=lambda i: (-len(docs[i].text) * len(docs[i].labels), i)):
        target = loads.index(min(loads))
        shares[target].append(index)
        loads[target] += len(docs[index].text) * len(docs[index].labels)
    return [sorted(share) for share in shares]
