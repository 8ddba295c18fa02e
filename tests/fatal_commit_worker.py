"""`seqstream worker` in exactly-once mode whose second batch's transaction fails fatally once.

The batch's records reach the broker inside a real open transaction, then the worker is told the
transaction failed fatally (as librdkafka says when a broker was lost mid-transaction and the abort
is refused): it must replace its producer, whose init_transactions aborts the open transaction on
the broker, and write the batch's results again without sending the batch through the model twice.
Every batch through the model prints `model saw N documents`. The real TransactionalWorker otherwise.

    python -m tests.fatal_commit_worker worker
"""

from __future__ import annotations

import sys

from confluent_kafka import KafkaError

import streams.workers.transactional
from streams.flow.pipeline import Taken
from streams.flow.routing import Inbound, Outgoing
from streams.workers.transactional import Outcome, TransactionalWorker

FAIL_BATCH = 2
INJECTED = "injecting a fatal transactional error"
original_commit = TransactionalWorker._commit
original_finish = streams.workers.transactional.BatchDriver.finish
commits = 0


def finish_and_say(self, taken: Taken, prepare_wait_s: float):
    print(f"model saw {taken.documents} documents", flush=True)
    return original_finish(self, taken, prepare_wait_s)


def commit_failing_once(self: TransactionalWorker, batch: list[Inbound], outgoing: list[Outgoing]) -> Outcome:
    global commits
    commits += 1
    if commits != FAIL_BATCH:
        return original_commit(self, batch, outgoing)
    self.producer.begin_transaction()
    for o in outgoing:
        self._produce(o)
    self.producer.flush(10)  # on the broker, inside the transaction the new producer must abort
    print(INJECTED, flush=True)
    return self._start_over(batch, KafkaError(KafkaError._FATAL, "injected by the test", fatal=True))


if __name__ == "__main__":
    TransactionalWorker._commit = commit_failing_once
    streams.workers.transactional.BatchDriver.finish = finish_and_say
    from streams.cli.main import main

    sys.exit(main())
