"""`seqstream review serve`: the desk's queue read on a thread of its own, its pages served by uvicorn."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

import uvicorn
from confluent_kafka import KafkaException

from streams.kafka.backoff import Backoff
from streams.review.app import desk_app
from streams.review.queue import Queue
from streams.settings import Settings

log = logging.getLogger(__name__)


def read_queue(queue: Queue, stop: threading.Event) -> None:
    """Poll the review topic until `stop`; a broker away is waited for, not fatal."""
    backoff = Backoff(0.5, 10.0)
    while not stop.is_set():
        try:
            queue.poll(0.5)
            backoff.reset()
        except KafkaException as exc:
            pause = backoff.next()
            log.warning("review topic not readable (%s): again in %.1f s", exc, pause)
            stop.wait(pause)


def serve(settings: Settings, instance: str) -> None:
    """Serve the desk until the process is stopped (uvicorn handles SIGINT and SIGTERM)."""
    review = settings.review
    queue = Queue(settings, instance)
    app = desk_app(review, queue)
    stop = threading.Event()
    reader = threading.Thread(target=read_queue, args=(queue, stop), name="review-queue", daemon=True)
    reader.start()
    log.info("review desk %s on http://%s:%d/ (group %s)", instance, review.host, review.port, review.group_id)
    # uvicorn shuts down on SIGTERM/SIGINT, puts back the handlers it found and raises the signal
    # again: with these, that ends in SystemExit(0) here instead of killing the process, so the
    # queue below is closed (a static member: its partitions wait for it for a session) and the desk
    # exits 0 like a sink.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit)
    try:
        uvicorn.Server(uvicorn.Config(app, host=review.host, port=review.port, log_level="warning")).run()
    finally:
        stop.set()
        reader.join(5)
        queue.close()
        log.info("review desk %s stopped", instance)


def _exit(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)
