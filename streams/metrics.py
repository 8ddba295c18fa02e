"""Every Prometheus metric the worker exports, defined once, on a registry of its own.

The agent and the pipeline record into these at the edges; routing and validation stay pure.
A private registry (not prometheus_client's global one) makes the exported set exact: the
dashboard test compares the Grafana queries against `exported_series()`, nothing else leaks in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import Metric
from prometheus_client.process_collector import ProcessCollector

from schemas.messages import ModelInfo, Timings

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

# From a 1 ms tokenizer call to a multi-second CPU batch; the same buckets for every stage so
# that stages compare on one heatmap.
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
END_TO_END_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

STAGE_SECONDS = Histogram(
    "seqstream_stage_seconds",
    "Time spent per pipeline stage. queue: per document, from the consumer's fetch to the start of its "
    "micro-batch; tokenize, prefill, decode, postprocess (parsing + validation), serialise (routing + "
    "encoding) and produce (until the broker acknowledged every output): per batch.",
    ["stage"],
    buckets=STAGE_BUCKETS,
    registry=REGISTRY,
)
END_TO_END_SECONDS = Histogram(
    "seqstream_end_to_end_seconds",
    "Per document, from its submitted_at to the broker's acknowledgement of its output record "
    "(fields, review or dead letter); documents without submitted_at are not observed.",
    buckets=END_TO_END_BUCKETS,
    registry=REGISTRY,
)
BATCH_DOCUMENTS = Histogram(
    "seqstream_batch_documents",
    "Messages per micro-batch taken from the raw topic.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
    registry=REGISTRY,
)
INPUT_MESSAGES = Counter("seqstream_input_messages", "Raw-topic messages processed (acknowledged).", registry=REGISTRY)
OUTPUTS = Counter(
    "seqstream_outputs",
    "Output records written and acknowledged, by outcome. Each input ends in exactly one of fields, review "
    "or dead_letter; an alert (and, with the audit trail on, an audit record) comes in addition.",
    ["outcome"],
    registry=REGISTRY,
)
VALIDATION_RETRIES = Counter(
    "seqstream_validation_retries",
    "Re-generations asked by the validation loop (Extraction.retries); 0 until the engine retries.",
    registry=REGISTRY,
)
ENGINE_FAILURES = Counter(
    "seqstream_engine_failures",
    "Documents on which the engine raised alone (dead-lettered as processing_failed).",
    registry=REGISTRY,
)
CONSUMER_LAG = Gauge(
    "seqstream_consumer_lag",
    "Messages behind per assigned raw-topic partition: log end offset minus the group's committed offset.",
    ["topic", "partition"],
    registry=REGISTRY,
)
GPU_MEMORY_BYTES = Gauge(
    "seqstream_gpu_memory_bytes",
    "CUDA memory of the model's device after the latest batch; no samples when the model runs on CPU.",
    ["device", "kind"],
    registry=REGISTRY,
)
MODEL = Info("seqstream_model", "The model and engine that serve this worker.", registry=REGISTRY)
READY = Gauge(
    "seqstream_ready",
    "1 while /readyz passes (partitions assigned, model loaded, broker reachable), else 0.",
    registry=REGISTRY,
)

OUTCOMES = ("fields", "review", "alert", "dead_letter", "audit")
MODEL_STAGES = ("tokenize", "prefill", "decode", "postprocess")
STAGES = ("queue", *MODEL_STAGES, "serialise", "produce")

# Children created up front so that every series exists (at 0) before the first document.
for _outcome in OUTCOMES:
    OUTPUTS.labels(outcome=_outcome)
for _stage in STAGES:
    STAGE_SECONDS.labels(stage=_stage)


def observe_stage(stage: str, seconds: float) -> None:
    STAGE_SECONDS.labels(stage=stage).observe(max(seconds, 0.0))


def observe_model_timings(timings: Timings) -> None:
    """The engine's per-batch stage times (queue is per document and recorded by the caller)."""
    for stage in MODEL_STAGES:
        observe_stage(stage, getattr(timings, f"{stage}_ms") / 1000)


def set_model_info(info: ModelInfo) -> None:
    MODEL.info(
        {
            "name": info.name,
            "engine": info.engine,
            "attention": info.attention,
            "dtype": info.dtype,
            "device": info.device,
            "demo": str(info.demo).lower(),
        }
    )


def record_gpu_memory(device: str) -> None:
    if not device.startswith("cuda"):
        return
    import torch

    GPU_MEMORY_BYTES.labels(device=device, kind="allocated").set(torch.cuda.memory_allocated(device))
    GPU_MEMORY_BYTES.labels(device=device, kind="reserved").set(torch.cuda.memory_reserved(device))
    GPU_MEMORY_BYTES.labels(device=device, kind="peak_allocated").set(torch.cuda.max_memory_allocated(device))


def set_consumer_lag(lag: Mapping[tuple[str, int], int]) -> None:
    """Replace the lag series with the current assignment's, so revoked partitions disappear."""
    CONSUMER_LAG.clear()
    for (topic, partition), behind in lag.items():
        CONSUMER_LAG.labels(topic=topic, partition=str(partition)).set(behind)


def render() -> bytes:
    return generate_latest(REGISTRY)


def exported_series(families: Iterable[Metric] | None = None) -> set[str]:
    """Every series name a scrape can contain, samples or not yet (e.g. `..._bucket`, `..._total`)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("_sum", "_count", "_created"),
        "info": ("_info",),
        "gauge": ("",),
    }
    names: set[str] = set()
    for family in REGISTRY.collect() if families is None else families:
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ("",)))
    return names
