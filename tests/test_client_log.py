"""librdkafka's log lines through Python logging, one WARNING per event (streams/kafka/client_log.py)."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from streams.kafka.client_log import LOGGER_NAME, WINDOW_S, ClientLog

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
