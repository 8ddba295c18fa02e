"""The Faust app: the raw topic in, four output topics out, one thin agent between.

Offsets: `noack_take` leaves every event un-acked until all outputs of its batch are acknowledged
by the broker. Faust's `take()` would ack a batch even when its handler raised, losing it; a
killed worker here loses nothing: the un-acked batch is delivered again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import faust

from streams.pipeline import Pipeline
from streams.routing import Inbound, Outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings, pipeline: Pipeline) -> faust.App:
    servers = ";".join(settings.kafka.bootstrap_servers.split(","))
    app = faust.App(
        settings.worker.app_id,
        broker=f"kafka://{servers}",
        datadir=settings.worker.data_dir,
        consumer_auto_offset_reset="earliest",
        producer_acks=settings.kafka.producer_acks,
        producer_max_request_size=settings.topics.dead_letter_max_message_bytes,
        broker_session_timeout=settings.kafka.session_timeout_s,
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
        for name in (t.fields, t.review, t.alerts, t.dead_letter)
    }
    # One model thread: the GPU runs one batch at a time, and the event loop stays free for
    # heartbeats and fetching while it does.
    model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
    window_s = settings.batch.window_ms / 1000

    async def write(outgoing: list[Outgoing]) -> None:
        pending = [await outputs[o.topic].send(key=o.key, value=o.value) for o in outgoing]
        await asyncio.gather(*pending)

    @app.agent(raw_topic, name="extract")
    async def extract(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for events in stream.noack_take(settings.batch.max_documents, within=window_s):
            started = time.monotonic()
            received_at = datetime.now(UTC)
            batch = [
                Inbound(
                    topic=e.message.topic,
                    partition=e.message.partition,
                    offset=e.message.offset,
                    key=e.message.key,
                    value=e.message.value,
                    received_at=received_at,
                )
                for e in events
            ]
            queue_ms = [(started - e.message.time_in) * 1000 if e.message.time_in else 0.0 for e in events]
            outgoing = await loop.run_in_executor(model_thread, pipeline.process_batch, batch, queue_ms)
            await write(outgoing)
            for event in events:
                await stream.ack(event)
            log.info(
                "batch of %d done in %.0f ms: %d messages written",
                len(events),
                (time.monotonic() - started) * 1000,
                len(outgoing),
            )

    return app
