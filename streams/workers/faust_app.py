"""The Faust app: the raw topic in, four output topics (five with the audit trail) out, one thin agent between.

Offsets: `noack_take` leaves every event un-acked until all outputs of its batch are acknowledged
by the broker. Faust's `take()` would ack a batch even when its handler raised, losing it; a
killed worker here loses nothing: the un-acked batch is delivered again.

With a web port, Faust's web server also serves `/metrics` (Prometheus), `/healthz` and `/readyz`.
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
from faust.web import Request, Response, View

from streams import metrics
from streams.flow.driver import BatchDriver
from streams.flow.pipeline import Pipeline
from streams.flow.routing import Outgoing
from streams.kafka.inbound import Inbound
from streams.kafka.replication import Backoff, write_until_acknowledged
from streams.kafka.security import faust_credentials
from streams.observe.health import BrokerProbe, Readiness, check_readiness
from streams.settings import Settings

log = logging.getLogger(__name__)

LAG_INTERVAL_S = 5.0


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
        web_enabled=settings.worker.web_port > 0,
        web_port=max(settings.worker.web_port, 1),
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

    @app.agent(raw_topic, name="extract")
    async def extract(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for events in stream.noack_take(settings.batch.max_documents, within=window_s):
            started = time.monotonic()
            received_at = datetime.now(UTC)
            batch = [_inbound(e.message, received_at, started) for e in events]
            processed = await loop.run_in_executor(model_thread, driver.process, batch)
            produce_started = time.monotonic()
            await write(processed.outgoing)
            produce_s = time.monotonic() - produce_started
            for event in events:
                await stream.ack(event)
            driver.delivered(processed, started, produce_s)

    if settings.worker.web_port > 0:
        _add_operations_pages(app, settings, pipeline)
    return app


def _retriable(exc: Exception) -> bool:
    # aiokafka marks broker-side conditions (NOT_ENOUGH_REPLICAS, leader moves) retriable; a batch
    # that expired while they lasted raises KafkaTimeoutError, which is not marked but is the same.
    return bool(getattr(exc, "retriable", False)) or isinstance(exc, KafkaTimeoutError)


def _add_operations_pages(app: faust.App, settings: Settings, pipeline: Pipeline) -> None:
    probe = BrokerProbe(settings)
    # The broker calls block; they get their own thread so neither the loop nor the model waits.
    probe_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe")

    def assigned_raw_partitions() -> set[tuple[str, int]]:
        try:
            assignment = app.consumer.assignment()
        except Exception:  # the consumer is not started yet (or already stopped)
            return set()
        return {(tp.topic, tp.partition) for tp in assignment if tp.topic == settings.topics.raw}

    async def readiness() -> Readiness:
        reachable = await asyncio.get_running_loop().run_in_executor(probe_thread, probe.reachable)
        return check_readiness(assigned_raw_partitions(), pipeline.engine, reachable)

    @app.page("/metrics")
    async def metrics_page(self: View, request: Request) -> Response:
        return self.bytes(metrics.render(), content_type="text/plain; version=0.0.4")

    @app.page("/healthz")
    async def healthz(self: View, request: Request) -> Response:
        # The event loop answered: the process is alive and not wedged.
        return self.json({"alive": True})

    @app.page("/readyz")
    async def readyz(self: View, request: Request) -> Response:
        state = await readiness()
        return self.json(state.body(), status=200 if state.ready else 503)

    @app.timer(LAG_INTERVAL_S)
    async def update_lag_and_readiness() -> None:
        # Also here, not only on /readyz: the ready gauge must be fresh for Prometheus on its own.
        await readiness()
        partitions = assigned_raw_partitions()
        try:
            lag = await asyncio.get_running_loop().run_in_executor(probe_thread, probe.lag, partitions)
        except Exception as exc:  # a broker hiccup must not stop the timer; the gauge just goes stale
            log.warning("could not read consumer lag: %s", exc)
            return
        metrics.set_consumer_lag(lag)


def _inbound(message: faust.types.Message, received_at: datetime, taken_at: float) -> Inbound:
    # Faust's monitor stamps `time_in` (monotonic) as the message comes in; without it, the take.
    fetched_at = message.time_in if message.time_in is not None else taken_at
    # Faust gives the broker's timestamp in seconds (aiokafka's milliseconds / 1000).
    timestamp = datetime.fromtimestamp(message.timestamp, UTC) if message.timestamp else None
    return Inbound(
        message.topic, message.partition, message.offset, message.key, message.value, received_at, fetched_at, timestamp
    )
