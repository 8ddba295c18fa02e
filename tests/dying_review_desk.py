"""A review desk that dies inside its first decision's transaction: after the fields record, the
decision and the offset were sent, before the commit (tests/test_review_desk.py)."""

from __future__ import annotations

import os
import sys
import time

from confluent_kafka import TopicPartition

from streams.review.decision import Choice
from streams.review.queue import Queue
from streams.settings import load_settings


class DyingQueue(Queue):
    def _transact(self, outputs: list[tuple[str, bytes, bytes]], commit: TopicPartition) -> None:
        self.producer.begin_transaction()
        for topic, key, value in outputs:
            self.producer.produce(topic, value, key)
        self.producer.flush(10)  # on the broker, uncommitted
        self.producer.send_offsets_to_transaction([commit], self.consumer.consumer_group_metadata(), 10)
        os._exit(9)


queue = DyingQueue(load_settings(), sys.argv[1])
deadline = time.monotonic() + 60
while queue.depth() < 2 and time.monotonic() < deadline:
    queue.poll(0.2)
held = queue.next_for("ann")
if held is None:
    sys.exit("nothing to decide")
queue.decide(held.at, Choice("ann", "accept", {}))
sys.exit("the decision was committed: it should have died first")
