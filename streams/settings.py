"""The worker's one settings object. Defaults here; environment variables override them.

`SEQSTREAM_<SECTION>__<FIELD>` sets one field, e.g. `SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS=host:9092`,
`SEQSTREAM_BATCH__MAX_DOCUMENTS=16`, `SEQSTREAM_MODEL__PATH=/models/seqgpt`. Values are read once,
at start-up, and handed down; nothing deeper in the code reads the environment.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from model import EngineSettings, WindowSettings
from schemas.decode import MAX_DOCUMENT_CHARS

ENV_PREFIX = "SEQSTREAM_"


class KafkaSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    bootstrap_servers: str = "127.0.0.1:9092"
    # Output writes must be acknowledged by the broker before the input offset may be committed.
    producer_acks: int = -1
    session_timeout_s: float = 30.0
    # Static membership (KIP-345): a consumer's `group.instance.id`, so that a restarted worker or
    # sink is handed its partitions back at once instead of after the dead one's session. Empty =
    # `<hostname>-<n>`, n the lowest slot number on this host free in its group (a lock the kernel
    # frees when its process dies: a restart takes its predecessor's; streams/kafka/membership.py).
    # Set it per worker slot where the hostname changes on restart (a Deployment's pods); `none` =
    # dynamic membership. Two live members of a group must never share one: the broker fences the older.
    group_instance_id: str = ""
    # The model may hold a batch for seconds; the consumer must not be evicted meanwhile.
    max_poll_interval_s: float = 300.0
    # Most bytes one fetch brings per partition (at least one message, however large).
    max_partition_fetch_bytes: int = 1024 * 1024
    # Exactly-once mode only: the broker aborts a transaction left open longer than this (a worker
    # that died mid-commit under a transactional id nobody reuses); until then read_committed readers
    # see nothing past it on the partitions it wrote to. A transaction spans only the writes of one
    # batch, after the model is done: at the batch bounds that took well under a second on a
    # three-broker cluster (ops/RELIABILITY.md), so 10 s, Kafka Streams' exactly-once default, is ample.
    transaction_timeout_s: float = 10.0
    # Security: one set of fields maps to both the Faust consumer and the confluent-kafka clients
    # (streams/kafka/security.py). SASL_SSL with SCRAM-SHA-512 is the intended production setting.
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    sasl_username: str = ""
    sasl_password: str = ""
    # CA bundle (PEM) that signed the brokers' certificates; empty = the system's trust store.
    ssl_cafile: str = ""
    # Client certificate and key (PEM), only for brokers that require mutual TLS.
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    # Off only for a test broker without a matching name in its certificate: it allows impostors.
    ssl_check_hostname: bool = True

    def __repr__(self) -> str:
        # msgspec's repr would print every field; the password must never reach a log or a traceback.
        shown = {f: getattr(self, f) for f in self.__struct_fields__ if f != "sasl_password"}
        masked = "'***'" if self.sasl_password else "''"
        return f"KafkaSettings({', '.join(f'{k}={v!r}' for k, v in shown.items())}, sasl_password={masked})"


class TopicSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    raw: str = "seqstream.raw"
    fields: str = "seqstream.fields"
    review: str = "seqstream.review"
    alerts: str = "seqstream.alerts"
    dead_letter: str = "seqstream.dead-letter"
    # Decode traces, written only while worker.audit is on (the topic is created either way).
    audit: str = "seqstream.audit"
    partitions: int = 6
    # A three-broker cluster's settings: every output survives one broker lost, and with acks=all a
    # write needs two in-sync copies, so no acknowledged record lives on one disk only. A single
    # development broker needs 1 and 1 (`topics create` refuses more replicas than live brokers).
    replication_factor: int = 3
    min_insync_replicas: int = 2
    raw_retention_ms: int = 7 * 24 * 3600 * 1000
    event_retention_ms: int = 30 * 24 * 3600 * 1000
    # Dead letters carry the original bytes base64-encoded: room for a message at the size limit.
    dead_letter_max_message_bytes: int = 4 * 1024 * 1024


class BatchSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    max_documents: int = 32
    window_ms: float = 5.0
    max_document_bytes: int = 512 * 1024
    # Longer texts are dead-lettered as `too_long`; up to it, documents are read in windows.
    max_document_chars: int = MAX_DOCUMENT_CHARS
    # Documents fetched ahead of the model (Faust's stream buffer; fetching pauses when it is full).
    # Times max_document_bytes, it bounds what a flood of input can make the worker hold: Faust's
    # default of 4096 would allow 2 GiB of 512 KiB documents, this 64 MiB.
    buffer_documents: int = 128
    # Seconds an engine call may take once it has the engine (0 = none). A call past it is abandoned
    # and its batch bisected like one that raised: the document that hangs is dead-lettered as
    # `deadline_exceeded`, the rest are written. Generous: a slow batch only costs a bisection.
    deadline_s: float = 600.0


class WorkerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    app_id: str = "seqstream"
    worker_id: str = msgspec.field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    # at_least_once: the Faust agent (streams/workers/faust_app.py); a crash may repeat a batch's records, which
    # are byte-identical outside `processing`. exactly_once: each batch's records and its input
    # offsets commit in one Kafka transaction (streams/workers/transactional.py); readers need read_committed.
    delivery: Literal["at_least_once", "exactly_once"] = "at_least_once"
    # Exactly-once only. Keep it stable per worker slot (e.g. a StatefulSet pod name): a restarted
    # worker with the same id aborts its predecessor's open transaction at once, where a new id
    # leaves read_committed readers waiting up to kafka.transaction_timeout_s. Empty = app_id-worker_id.
    transactional_id: str = ""
    # The worker's HTTP port (0 = off): /metrics, /healthz and /readyz (streams/observe/http.py).
    web_port: int = 0
    log_level: str = "info"
    # Faust's local state. Not relative to the working directory: a worker started anywhere must
    # find (or make) it, so it lives in the user's cache like the rest of SeqStream's files.
    data_dir: str = msgspec.field(default_factory=lambda: default_data_dir(os.environ))
    # Write every record's per-token decode trace to the audit topic (costs bytes; see ops/BENCHMARKS.md).
    audit: bool = False


def default_data_dir(environ: Mapping[str, str]) -> str:
    """`$XDG_CACHE_HOME/seqstream/faust`, `~/.cache/seqstream/faust` without it."""
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "seqstream", "faust")


def transactional_id_prefix(worker: WorkerSettings) -> str:
    return f"{worker.app_id}-"


def transactional_id(worker: WorkerSettings) -> str:
    return worker.transactional_id or transactional_id_prefix(worker) + worker.worker_id


class AlertSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    # `seqstream alerts` POSTs each alert record's JSON here when set.
    webhook_url: str = ""
    webhook_timeout_s: float = 5.0
    # A webhook that is down must not stall the table: a few tries, then the alert is reported as not sent.
    webhook_attempts: int = 3


# `password=...` in a key/value DSN, `user:password@` in a URI: what a printed DSN must not show.
_DSN_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)|(://[^:/@\s]*:)[^@\s]*(@)")


def mask_dsn(dsn: str) -> str:
    return _DSN_PASSWORD.sub(lambda m: f"{m[1]}***" if m[1] else f"{m[3]}***{m[4]}", dsn)


class SinkSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`seqstream sink postgres`: the fields topic into PostgreSQL tables for BI (streams/sinks/postgres.py)."""

    # libpq connection string, key/value (`host=db dbname=bi user=sink`) or URI (`postgresql://...`);
    # empty = libpq's own defaults and PG* environment variables (PGHOST, PGDATABASE, PGPASSWORD ...).
    dsn: str = ""
    # PostgreSQL schema holding doc_fields, field_values and sink_offsets; created if missing.
    db_schema: str = "public"
    # The sink's consumer group: Kafka's lag metrics for it, and how several sinks share partitions.
    # Its committed offsets are for monitoring only; the database's sink_offsets table is the truth.
    group_id: str = "seqstream-sink-postgres"
    # Records applied per database transaction (one poll's worth): bigger is faster, a crash redoes at most this.
    max_records: int = 500
    poll_timeout_s: float = 1.0
    # /metrics for Prometheus (its lag, records applied; streams/observe/http.py); 0 = off.
    metrics_port: int = 0

    def __repr__(self) -> str:
        shown = {f: getattr(self, f) for f in self.__struct_fields__ if f != "dsn"}
        return f"SinkSettings(dsn={mask_dsn(self.dsn)!r}, {', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class ReviewSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`seqstream review serve`: the review desk, a web page where people clear the review topic (streams/review/)."""

    # What a reviewer types to sign in, and the key that signs their session cookie. Empty: the desk
    # refuses to start (only a proxy header, below, would then say who is who, and it may be unset).
    secret: str = ""
    # A header an authenticating proxy (oauth2-proxy, an OIDC ingress) sets to the signed-in user;
    # when set and present, it names the reviewer and no sign-in form is shown. Only behind such a proxy.
    user_header: str = ""
    # The desks' consumer group on the review topic: several desks share the queue by its partitions.
    group_id: str = "seqstream-review-desk"
    host: str = "127.0.0.1"
    port: int = 8088
    # A record shown to a reviewer is theirs this long; then another reviewer may take it.
    lease_s: float = 900.0

    def __repr__(self) -> str:
        shown = {f: getattr(self, f) for f in self.__struct_fields__ if f != "secret"}
        return f"ReviewSettings(secret='***', {', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)
    topics: TopicSettings = msgspec.field(default_factory=TopicSettings)
    batch: BatchSettings = msgspec.field(default_factory=BatchSettings)
    model: EngineSettings = msgspec.field(default_factory=EngineSettings)
    windows: WindowSettings = msgspec.field(default_factory=WindowSettings)
    worker: WorkerSettings = msgspec.field(default_factory=WorkerSettings)
    alerts: AlertSettings = msgspec.field(default_factory=AlertSettings)
    sink: SinkSettings = msgspec.field(default_factory=SinkSettings)
    review: ReviewSettings = msgspec.field(default_factory=ReviewSettings)


def settings_environ(settings: Settings) -> dict[str, str]:
    """The `SEQSTREAM_*` variables that make `load_settings` build these settings (for child workers)."""
    env: dict[str, str] = {}
    for section, values in msgspec.to_builtins(settings).items():
        for name, value in values.items():
            if value is None:  # unset: the default applies
                continue
            env[f"{ENV_PREFIX}{section.upper()}__{name.upper()}"] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
    return env


def load_settings(environ: Mapping[str, str] | None = None, **overrides: dict[str, Any]) -> Settings:
    """Defaults, then `SEQSTREAM_*` variables, then explicit per-section overrides (from the CLI)."""
    environ = os.environ if environ is None else environ
    sections: dict[str, dict[str, Any]] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX) or "__" not in key:
            continue
        section, _, name = key[len(ENV_PREFIX) :].lower().partition("__")
        sections.setdefault(section, {})[name] = value
    for section, values in overrides.items():
        sections.setdefault(section, {}).update({k: v for k, v in values.items() if v is not None})
    unknown = set(sections) - set(Settings.__struct_fields__)
    if unknown:
        raise ValueError(f"unknown settings section(s): {', '.join(sorted(unknown))}")
    try:
        # strict=False: environment strings become the ints, floats and bools the fields declare.
        return msgspec.convert(sections, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid settings: {exc}") from None
