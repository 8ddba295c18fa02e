"""`seqstream worker` in exactly-once mode whose second batch's `send_offsets_to_transaction` hangs.

The batch's records are in a real open transaction when its offsets call blocks for good (as
librdkafka's did for 75 s once the coordinator had been away): the worker must stop waiting at the
call's deadline, replace the producer (whose init_transactions aborts the open transaction) and
write the batch's kept results again, the model not seeing the batch twice. Every batch through
the model prints `model saw N documents`. The real TransactionalWorker otherwise.

    python -m tests.stuck_call_worker worker
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import streams.workers.transactional
from streams.flow.pipeline import Taken
from streams.workers.transactional import TransactionalWorker

HANG_AT = 2
INJECTED = "send_offsets_to_transaction hangs now"
original_call = TransactionalWorker._call
original_finish = streams.workers.transactional.BatchDriver.finish
sends = 0


def finish_and_say(self, taken: Taken, prepare_wait_s: float):
    print(f"model saw {taken.documents} documents", flush=True)
    return original_finish(self, taken, prepare_wait_s)


def call_hanging_once(self: TransactionalWorker, what: str, call: Callable[[], None]) -> None:
    global sends
    if what == "send_offsets_to_transaction":
        sends += 1
        if sends == HANG_AT:
            print(INJECTED, flush=True)
            call = threading.Event().wait  # blocks for good, on the deadline's thread
    original_call(self, what, call)


if __name__ == "__main__":
    TransactionalWorker._call = call_hanging_once
    streams.workers.transactional.BatchDriver.finish = finish_and_say
    from streams.cli.main import main

    sys.exit(main())
