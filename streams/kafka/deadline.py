"""A deadline on a blocking librdkafka call that may not honour its own timeout.

librdkafka's transactional calls take a timeout, but once the transaction coordinator was away
some of them block past it (confluentinc/librdkafka#5456, #5511: `send_offsets_to_transaction`
stuck for minutes after a broker outage). A thread cannot be stopped: the call runs on one of its
own, the caller stops waiting at the deadline and abandons the client that made it (a new
transactional producer fences the old one; the stuck thread returns or errors whenever librdkafka
lets it, and its result is dropped).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from streams.settings import KafkaSettings

# What a call may take beyond librdkafka's own timeout before it is given up on.
GRACE_S = 2.0


class Stuck(Exception):
    """A call did not return by its deadline (it is left running on its thread)."""


def call_timeout_s(kafka: KafkaSettings) -> float:
    """librdkafka's timeout for one transactional call: the transaction's own timeout. Past it the
    broker aborts the transaction anyway, so waiting longer on one of its calls gains nothing."""
    return kafka.transaction_timeout_s


def within(seconds: float, what: str, call: Callable[[], None]) -> None:
    """Run `call` on a thread of its own and wait `seconds` for it: Stuck if it has not returned
    (it is left running, daemon), its exception if it raised."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"kafka-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Stuck(f"{what} did not return in {seconds:.0f} s")
    if failure:
        raise failure[0]
