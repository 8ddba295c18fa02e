"""`seqstream worker` in exactly-once mode whose transactions stay open for a while after their
records were sent, so that a test can SIGKILL it inside a transaction, not only between two.

It prints `transaction open` once a batch's records have reached the broker uncommitted; the test
kills on that line. The real TransactionalWorker otherwise.

    python -m tests.slow_commit_worker worker
"""

from __future__ import annotations

import sys
import time

import streams.workers.transactional
from streams.flow.routing import Outgoing
from streams.workers.transactional import Outcome

OPEN_S = 0.6
original_produce = streams.workers.transactional.TransactionalWorker._produce
original_commit = streams.workers.transactional.TransactionalWorker._commit


def commit_slowly(self, batch, outgoing: list[Outgoing]) -> Outcome:
    def produce_then_linger(o: Outgoing) -> None:
        original_produce(self, o)
        if o is outgoing[-1]:
            self.producer.flush(10)  # on the broker, inside the still open transaction
            print("transaction open", flush=True)
            time.sleep(OPEN_S)

    self._produce = produce_then_linger
    return original_commit(self, batch, outgoing)


if __name__ == "__main__":
    streams.workers.transactional.TransactionalWorker._commit = commit_slowly
    from streams.cli.main import main

    sys.exit(main())
