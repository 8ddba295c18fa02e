"""The Faust app: the raw topic in, four output topics (five with the audit trail) out, one thin agent between.

Offsets: `noack_take` leaves every event un-acked until all outputs of its batch are acknowledged
by the broker. Faust's `take()` would ack a batch even when its handler raised, losing it; a
killed worker here loses nothing: the un-acked batch is delivered again.

With a web port, `seqstream worker` serves `/metrics`, `/healthz` and `/readyz` beside it
(streams/observe/http.py, as for the exactly-once worker); Faust's own web server stays off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import faust
from aiokafka.errors import KafkaTimeoutError

from streams import metrics
from streams.flow.driver import BatchDriver
from streams.flow.pipeline import Pipeline, Taken
from streams.flow.routing import Outgoing
from streams.kafka.backoff import Backoff
from streams.kafka.inbound import Inbound
from streams.kafka.replication import write_until_acknowledged
from streams.kafka.security import faust_credentials
from streams.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings, pipeline: Pipeline, instance_id: str | None = None) -> faust.App:
    """The Faust app and its agent; `instance_id` is the consumer's `group.instance.id` (None = dynamic)."""
    servers = ";".join(settings.kafka.bootstrap_servers.split(","))
    # Faust makes its data directory without parents and dies on a missing one at start-up.
    data_dir = Path(settings.worker.data_dir).expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        settings.worker.app_id,
        broker=f"kafka://{servers}",
        # None = plaintext; else SASL (SCRAM) and/or TLS, from the same fields as the CLI's clients.
        broker_credentials=faust_credentials(settings.kafka),
        datadir=str(data_dir),
        consumer_auto_offset_reset="earliest",
        producer_acks=settings.kafka.producer_acks,
        producer_max_request_size=settings.topics.dead_letter_max_message_bytes,
        broker_session_timeout=settings.kafka.session_timeout_s,
        # Static membership: restarted, the worker takes its partitions back at once.
        consumer_group_instance_id=instance_id,
        broker_max_poll_interval=settings.kafka.max_poll_interval_s,
        # Back-pressure: what the worker may hold ahead of the model is bounded by these two.
        stream_buffer_maxsize=settings.batch.buffer_documents,
        consumer_max_fetch_size=settings.kafka.max_partition_fetch_bytes,
        topic_disable_leader=True,
        # /metrics, /healthz and /readyz come from the server every process shares (streams/observe/http.py).
        web_enabled=False,
    )
    raw_topic = app.topic(settings.topics.raw, key_serializer="raw", value_serializer="raw")
    t = settings.topics
    outputs = {
        name: app.topic(name, key_serializer="raw", value_serializer="raw")
        for name in (t.fields, t.review, t.alerts, t.dead_letter, t.audit)
    }
    driver = BatchDriver(pipeline, t)
    # One model thread: the GPU runs one batch at a time, and the event loop stays free for
    # heartbeats and fetching while it does.
    model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
    window_s = settings.batch.window_ms / 1000
    metrics.set_model_info(pipeline.engine.info)

    backoff = Backoff()

    async def write(outgoing: list[Outgoing]) -> None:
        async def send_all() -> None:
            pending = [await outputs[o.topic].send(key=o.key, value=o.value) for o in outgoing]
            await asyncio.gather(*pending)

        # aiokafka retries NOT_ENOUGH_REPLICAS itself until its request timeout; past that the batch
        # is written again after a pause, never dropped and never left to crash the agent.
        await write_until_acknowledged(send_all, _retriable, backoff, "writing a batch")

    # And one thread that takes the next batch (decoding, tokenising, grammars) while the model runs
    # this one: a single slot, so the worker holds at most two batches beside the stream buffer.
    prepare_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")

    @app.agent(raw_topic, name="extract")
    async def extract(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        batches = stream.noack_take(settings.batch.max_documents, within=window_s).__aiter__()

        def take(events: list[faust.types.EventT]) -> tuple[list[faust.types.EventT], float, asyncio.Future[Taken]]:
            started = time.monotonic()
            received_at = datetime.now(UTC)
            batch = [_inbound(e.message, received_at, started) for e in events]
            return events, started, loop.run_in_executor(prepare_thread, driver.take, batch)

        async def next_events() -> list[faust.types.EventT] | None:
            try:
                return await batches.__anext__()
            except StopAsyncIteration:  # the stream ends when the worker stops: no crash in its log
                return None

        fetching: asyncio.Future[list[faust.types.EventT] | None] | None = None

        def fetch() -> asyncio.Future[list[faust.types.EventT] | None]:
            """The call for the next batch: the one under way, or a new one."""
            nonlocal fetching
            if fetching is None:
                fetching = asyncio.ensure_future(next_events())
            return fetching

        ahead = None
        try:
            while True:
                if ahead is None:
                    fetched = await fetch()
                    if fetched is None:
                        return
                    fetching, ahead = None, take(fetched)
                (events, started, taking), ahead = ahead, None
                waiting = time.monotonic()
                taken = await taking
                finishing = loop.run_in_executor(model_thread, driver.finish, taken, time.monotonic() - waiting)
                # While the model runs this batch, the next one is taken and prepared, not at once but
                # late enough to hold what arrives meanwhile (streams/flow/driver.py). Its events stay
                # un-acked until its own outputs are acknowledged, as every batch's.
                await asyncio.wait({finishing}, timeout=driver.look_ahead_s(settings.batch.max_documents))
                done, _ = await asyncio.wait({finishing, fetch()}, return_when=asyncio.FIRST_COMPLETED)
                if fetching in done and (fetched := fetching.result()) is not None:
                    fetching, ahead = None, take(fetched)
                processed = await finishing
                produce_started = time.monotonic()
                await write(processed.outgoing)
                produce_s = time.monotonic() - produce_started
                for event in events:
                    await stream.ack(event)
                driver.delivered(processed, started, produce_s)
        finally:
            if fetching is not None:
                fetching.cancel()

    return app


def _retriable(exc: Exception) -> bool:
    # aiokafka marks broker-side conditions (NOT_ENOUGH_REPLICAS, leader moves) retriable; a batch
    # that expired while they lasted raises KafkaTimeoutError, which is not marked but is the same.
    return bool(getattr(exc, "retriable", False)) or isinstance(exc, KafkaTimeoutError)


class RawAssignment:
    """The raw-topic partitions the app's consumer holds, as its rebalance signals report them: what
    readiness and the lag gauge look at (streams/observe/http.py asks from its own thread, which
    must not touch the app: its consumer, made lazily there, would belong to no event loop)."""

    def __init__(self, app: faust.App, raw_topic: str) -> None:
        self.held: frozenset[tuple[str, int]] = frozenset()

        @app.on_partitions_assigned.connect
        async def assigned(_app: faust.App, assigned: set, **_: object) -> None:
            # An eager rebalance (aiokafka's): every partition held after it, not only new ones.
            self.held = frozenset((tp.topic, tp.partition) for tp in assigned if tp.topic == raw_topic)

        @app.on_partitions_revoked.connect
        async def revoked(_app: faust.App, revoked: set, **_: object) -> None:
            self.held = self.held - {(tp.topic, tp.partition) for tp in revoked}

    def __call__(self) -> set[tuple[str, int]]:
        return set(self.held)


def _inbound(message: faust.types.Message, received_at: datetime, taken_at: float) -> Inbound:
    # Faust's monitor stamps `time_in` (monotonic) as the message comes in; without it, the take.
    fetched_at = message.time_in if message.time_in is not None else taken_at
    # Faust gives the broker's timestamp in seconds (aiokafka's milliseconds / 1000).
    timestamp = datetime.fromtimestamp(message.timestamp, UTC) if message.timestamp else None
    return Inbound(
        message.topic, message.partition, message.offset, message.key, message.value, received_at, fetched_at, timestamp
    )
