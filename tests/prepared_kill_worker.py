"""`seqstream worker` that lingers after taking each batch (decoded, prepared for the engine) and
before the model runs it, so that a test can SIGKILL it between prepare and decode.

It prints `batch prepared, not yet run` once a batch is prepared; the test kills on that line. The
real worker otherwise, in whichever delivery mode the settings name (each prepares batch t+1 while
t decodes).

    python -m tests.prepared_kill_worker worker
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ops.stress.worker_process import Outputs, WorkerProcess
from streams.flow.driver import BatchDriver

COMMAND = [sys.executable, "-m", "tests.prepared_kill_worker", "worker"]
PREPARED = "batch prepared, not yet run"
LINGER_S = 0.6
original_take = BatchDriver.take


def take_then_linger(self: BatchDriver, batch):
    taken = original_take(self, batch)
    print(PREPARED, flush=True)
    time.sleep(LINGER_S)
    return taken


def kill_twice_with_a_batch_prepared(
    worker: WorkerProcess,
    reader,
    answered: Callable[[Outputs], int],
    documents: int,
    before_restart: Callable[[int], None] = lambda life: None,
) -> list[int]:
    """SIGKILL the started `worker` once `answered` documents reach 60, then 200, each time right after it
    has prepared a batch, and start it again (`before_restart(life)` first). Returns how many of the
    `documents` were not answered at each kill: the test asserts some were, or the kill proved nothing."""
    left_at_kill = []
    for life, threshold in enumerate((60, 200), start=1):
        reader.read_until(lambda o, n=threshold: answered(o) >= n, timeout_s=300, worker=worker)
        worker.wait_for_log(PREPARED, count=worker.log_count(PREPARED) + 1, timeout_s=120)
        worker.kill()
        left_at_kill.append(documents - answered(reader.outputs))
        before_restart(life)
        worker.start()
    return left_at_kill


if __name__ == "__main__":
    BatchDriver.take = take_then_linger
    from streams.cli.main import main

    sys.exit(main())
