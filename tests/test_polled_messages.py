"""What the workers and the sink take from a poll: messages, and whether the client died."""

from __future__ import annotations

from confluent_kafka import KafkaError

from streams.kafka.clients import fatal_error


class ErrorEvent:
    """A polled error event as librdkafka hands one over: no payload, an error."""

    def __init__(self, error: KafkaError) -> None:
        self._error = error

    def error(self) -> KafkaError:
        return self._error


def test_a_fatal_event_is_fatal_even_where_its_flag_says_otherwise() -> None:
    # A static member fenced after a broker outage arrived as this event in the three-broker fault
    # test; read as an ordinary error, the exactly-once worker warned and then polled nothing forever.
    fenced = KafkaError(KafkaError._FATAL, "Fatal error: Broker: Static consumer fenced by other consumer")
    assert not fenced.fatal()
    assert fatal_error([None, ErrorEvent(fenced)]) is fenced


def test_transient_errors_are_not_fatal() -> None:
    refused = KafkaError(KafkaError._TRANSPORT, "Connection refused")
    assert fatal_error([ErrorEvent(refused), None]) is None
