"""librdkafka's log lines through Python logging, one WARNING per event (streams/kafka/client_log.py)."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from streams.kafka.client_log import LOGGER_NAME, WINDOW_S, ClientLog, Windows, quiet_python_clients

FMT = "%s [%s] %s"


def test_the_first_line_of_an_event_warns_and_its_repeats_wait_for_the_next_window(caplog) -> None:
    now = [0.0]
    log = ClientLog(logging.getLogger(LOGGER_NAME), clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger=LOGGER_NAME)
    for _ in range(200):  # a leader moving: one line per retry
        log.log(logging.ERROR, FMT, "FAIL", "rdkafka#producer-1", "broker down")
    log.log(logging.CRITICAL, FMT, "TXNERR", "rdkafka#producer-1", "transaction aborted")
    log.log(logging.INFO, FMT, "JOIN", "rdkafka#consumer-2", "joining the group")
    now[0] = WINDOW_S + 1
    log.log(logging.ERROR, FMT, "FAIL", "rdkafka#producer-1", "broker down again")

    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 3, warnings
    assert "rdkafka#producer-1: FAIL" in warnings[0] and "broker down" in warnings[0]
    assert "TXNERR" in warnings[1]
    assert "broker down again" in warnings[2] and "199 more like it" in warnings[2]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 200  # 199 repeats and the notice


def test_a_real_client_without_a_broker_warns_once_instead_of_printing_each_retry(caplog, capfd) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER_NAME)
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "logger": ClientLog(), "reconnect.backoff.max.ms": 100})
    producer.produce("nowhere", b"x")
    producer.flush(3)
    fails = [r for r in caplog.records if "FAIL" in r.getMessage()]
    assert len([r for r in fails if r.levelno == logging.WARNING]) == 1
    assert len(fails) > 1, "librdkafka retried only once: the test shows nothing"
    assert "%3|" not in capfd.readouterr().err, "librdkafka printed to stderr itself"


@pytest.mark.parametrize("args", [("FAIL", "c", "t"), ()])
def test_any_call_shape_is_forwarded(caplog, args) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER_NAME)
    ClientLog().log(logging.WARNING, FMT if args else "plain text", *args)
    assert caplog.records


def test_a_benign_coordinator_retry_is_info() -> None:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("test.client_log.benign")
    logger.addHandler(handler := _Collect(records))
    logger.setLevel(logging.DEBUG)
    try:
        ClientLog(logger).log(
            logging.WARNING,
            FMT,
            "GETPID",
            "rdkafka#producer-1",
            "Failed to acquire idempotence PID from broker 1: Coordinator load in progress: retrying",
        )
    finally:
        logger.removeHandler(handler)
    assert [r.levelno for r in records] == [logging.INFO]


class _Collect(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_faust_s_python_clients_say_each_connection_error_once_a_window(caplog) -> None:
    """aiokafka inside Faust logs these every ~100 ms while a broker is away (issue 30's fault run)."""
    now = [0.0]
    repeat = quiet_python_clients(Windows(clock=lambda: now[0]))
    caplog.set_level(logging.DEBUG)
    client, fetcher = logging.getLogger("aiokafka"), logging.getLogger("aiokafka.consumer.fetcher")
    try:
        # Faust's own transport logger has it too (the driver's module is imported to make its logger).
        assert repeat in logging.getLogger("faust.transport.drivers.aiokafka").filters
        for _ in range(300):
            client.error("Unable connect to node with id %s: %s", 1, "[Errno 111] Connect call failed")
            fetcher.error("Failed fetch messages from %s: %s", 1, "NodeNotReadyError")
        client.info("a line below WARNING is never held back")
        now[0] = WINDOW_S + 1
        client.error("Unable connect to node with id %s: %s", 2, "[Errno 111] Connect call failed")
    finally:
        for name in list(logging.root.manager.loggerDict):
            logging.getLogger(name).removeFilter(repeat)
        for name in ("aiokafka", "faust.transport"):
            logging.getLogger(name).removeFilter(repeat)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 3, errors
    assert errors[0].startswith("Unable connect to node with id 1") and "NodeNotReadyError" in errors[1]
    assert errors[2].startswith("Unable connect to node with id 2") and "299 more like it" in errors[2]
    assert any(r.getMessage() == "a line below WARNING is never held back" for r in caplog.records)
