"""Plain confluent-kafka clients for the CLI, the demo and the tests (the worker itself is Faust)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from tqdm import tqdm

from schemas.decode import salvage_doc_id
from streams.kafka.client_log import CLIENT_LOG
from streams.kafka.security import librdkafka_security
from streams.settings import Settings


def client_config(settings: Settings) -> dict[str, object]:
    """What every confluent-kafka client and AdminClient of ours starts from: address, security, and
    librdkafka's log lines through Python logging, one WARNING per event (streams/kafka/client_log.py)."""
    return {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        **librdkafka_security(settings.kafka),
        "logger": CLIENT_LOG,
    }


def _raise(error: KafkaError) -> None:
    raise KafkaException(error)


def polled_messages(polled: Iterable[Message | None], on_error: Callable[[KafkaError], None] = _raise) -> list[Message]:
    """The messages among what `poll` or `consume` returned: the end-of-partition events librdkafka
    reports as messages are dropped, any other error goes to `on_error` (by default, raised)."""
    messages = []
    for message in polled:
        if message is None:
            continue
        error = message.error()
        if error is None:
            messages.append(message)
        elif error.code() != KafkaError._PARTITION_EOF:
            on_error(error)
    return messages


def fatal_error(polled: Iterable[Message | None]) -> KafkaError | None:
    """The first fatal error among what `poll` or `consume` returned: the client is unusable then.

    librdkafka reports a consumer's fatal error (a static member fenced) as an error event whose code
    is _FATAL while its `fatal()` flag may read False: both mean the client will deliver nothing more.
    """
    for message in polled:
        error = None if message is None else message.error()
        if error is not None and (error.fatal() or error.code() == KafkaError._FATAL):
            return error
    return None


def produce_lines(
    settings: Settings,
    topic: str,
    lines: Iterable[bytes],
    progress: bool = False,
    schedule: Sequence[float] | None = None,
) -> int:
    """Publish each line as one message, unmodified; raises if any delivery failed.

    `schedule` (wall-clock `time.time()` values, one per non-blank line) holds each line back until
    its time: a set arrival rate for benchmarks. Without it, lines go as fast as the client takes them.
    """
    producer = Producer({**client_config(settings), "enable.idempotence": True, "linger.ms": 5})
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error)

    lines = [line for line in lines if line.strip()]
    if schedule is not None and len(schedule) != len(lines):
        raise ValueError(f"{len(schedule)} send times for {len(lines)} lines")
    for i, line in enumerate(tqdm(lines, unit="doc", disable=not progress, desc=f"-> {topic}")):
        while schedule is not None and (wait := schedule[i] - time.time()) > 0:
            producer.poll(min(wait, 0.05))  # serve delivery callbacks while holding the line back
        doc_id = salvage_doc_id(line)
        while True:
            try:
                producer.produce(topic, value=line, key=doc_id.encode() if doc_id else None, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry this line
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(60)
    if errors or remaining:
        raise KafkaException(errors[0] if errors else f"{remaining} messages not delivered within 60 s")
    return len(lines)


def consume(
    settings: Settings,
    topics: list[str],
    *,
    from_beginning: bool = True,
    idle_timeout: float | None = None,
    max_messages: int | None = None,
) -> Iterator[Message]:
    """Read topics with a throw-away consumer group (commits nothing), until idle or enough."""
    consumer = Consumer(
        {
            **client_config(settings),
            "group.id": f"seqstream-reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            # An exactly-once worker's records appear once their batch's transaction commits; an
            # aborted batch's never (librdkafka's default, stated because the guarantee rests on it).
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(topics)
    seen = 0
    last = time.monotonic()
    try:
        while max_messages is None or seen < max_messages:
            polled = polled_messages([consumer.poll(0.5)])
            if not polled:
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    return
                continue
            last = time.monotonic()
            seen += 1
            yield polled[0]
    finally:
        consumer.close()
