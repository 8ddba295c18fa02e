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

from streams.flow.driver import BatchDriver

PREPARED = "batch prepared, not yet run"
LINGER_S = 0.6
original_take = BatchDriver.take


def take_then_linger(self: BatchDriver, batch):
    taken = original_take(self, batch)
    print(PREPARED, flush=True)
    time.sleep(LINGER_S)
    return taken


if __name__ == "__main__":
    BatchDriver.take = take_then_linger
    from streams.cli.main import main

    sys.exit(main())
