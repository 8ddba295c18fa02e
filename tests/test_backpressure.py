"""Load and back-pressure on a real broker: a flood of large documents, far more than the worker
can take in at once, must leave its memory bounded, let the lag grow and drain, and lose nothing.

Size: 1,500 documents of 30,000 characters (~90 KB each, ~130 MB in all) published at once, the
same code path as `seqstream-ops bench soak --minutes 0 --burst 1500 --text-chars 30000`, with
`SEQSTREAM_BATCH__MAX_DOCUMENT_CHARS=20000`: every document is a `too_long` dead letter carrying
its 90 KB back (base64), so each is fetched, buffered, decoded, batched and written like any other
but stops before the model. Read in windows, the same flood through the model took hours; what is
under test is what the worker holds ahead of the model, which that path exercises in full.
"""

from __future__ import annotations

import pytest

from ops.stress.soak import MIB, run_soak
from ops.stress.worker_process import isolated_settings, report

pytestmark = pytest.mark.kafka

BURST = 1500
TEXT_CHARS = 30_000
BUFFER_DOCUMENTS = 64
DOC_BYTES = 3 * TEXT_CHARS  # the sample texts are CJK: 3 UTF-8 bytes per character
PARTITIONS = 3
FETCH_BYTES = 1 * MIB
BATCH = 16
# What the worker may hold ahead of the model: the stream buffer, one fetch per partition, the
# batch in hand; x2 for Python's copies (message bytes, then the decoded text). On top, the
# model's working set for a full batch instead of the warm-up's single document, plus allocator
# slack: 48 MiB measured with 30 KB documents and a 64-document buffer, taken as 64 MiB.
# With Faust's default buffer (4096) and 30 KB documents the growth was 80 MiB; at 90 KB an
# unbounded buffer would hold the ~130 MiB published, beyond this bound (not run at that size).
MODEL_WORKING_SET = 64 * MIB
MAX_DOCUMENT_CHARS = 20_000  # below TEXT_CHARS: every flood document is a too_long dead letter
BOUND_BYTES = MODEL_WORKING_SET + 2 * ((BUFFER_DOCUMENTS + BATCH) * DOC_BYTES + PARTITIONS * FETCH_BYTES)


@pytest.mark.timeout(900)
def test_flood_of_large_documents_keeps_memory_bounded_and_drains(kafka_bootstrap, tiny_model_dir, tmp_path) -> None:
    settings, _ = isolated_settings(
        kafka_bootstrap,
        tiny_model_dir,
        tmp_path / "faust",
        batch__max_documents=str(BATCH),
        batch__buffer_documents=str(BUFFER_DOCUMENTS),
        kafka__max_partition_fetch_bytes=str(FETCH_BYTES),
        topics__partitions=str(PARTITIONS),
        # The flood, not the model, is under test: every document stops before it (too_long), and
        # the warm-up's short one decodes few tokens.
        batch__max_document_chars=str(MAX_DOCUMENT_CHARS),
        model__max_new_tokens="8",
    )
    result = run_soak(
        settings,
        minutes=0,
        burst=BURST,
        rate=0,
        text_chars=TEXT_CHARS,
        sample_s=2.0,
        drain_timeout_s=700,
        log_path=tmp_path / "worker.log",
    )
    growth = result.peak_rss_bytes - result.idle_rss_bytes
    report(
        "backpressure",
        sent=result.sent,
        received=result.answered,
        duplicated=result.duplicated,
        lost=result.lost,
        peak_lag=result.peak_lag,
        idle_rss_mib=round(result.idle_rss_bytes / MIB),
        peak_rss_mib=round(result.peak_rss_bytes / MIB),
        growth_mib=round(growth / MIB, 1),
        bound_mib=round(BOUND_BYTES / MIB, 1),
        published_mib=round(BURST * DOC_BYTES / MIB),
        samples=len(result.samples),
    )
    assert result.worker_alive and result.drained
    assert result.lost == 0 and result.sent == BURST
    assert result.dead_letter_codes == {"too_long": BURST}, "the flood went another way than the test says"
    assert len(result.samples) >= 3, "too few samples to say anything about memory"
    # The lag grew: the input really outran the worker (else this tested no back-pressure).
    assert result.peak_lag >= BURST // 2, result.peak_lag
    assert growth <= BOUND_BYTES, f"RSS grew {growth / MIB:.0f} MiB, the bound is {BOUND_BYTES / MIB:.0f} MiB"
