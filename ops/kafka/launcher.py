"""Single-node Apache Kafka (KRaft, broker+controller) for tests and local dev.

The broker runs from plain Maven Central jars, so neither Docker nor a Kafka
download is needed, only Java 17+ and Maven (the latter only on the first fetch).

    python -m ops.kafka.launcher fetch
    python -m ops.kafka.launcher run [--port 9092] [--data-dir DIR]

Only the stdlib is imported at module level. The readiness probe uses
confluent-kafka when it is installed and falls back to a TCP connect otherwise.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import hashlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

KAFKA_VERSION = "4.4.0"

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
LOG4J_CONFIG = HERE / "log4j2.xml"

HOST = "127.0.0.1"
DEFAULT_HEAP_OPTS = "-Xms256m -Xmx512m"
# C1 only: start-up is about 2 s faster, with less JIT work on a shared 2-core
# machine. Serial GC: no GC worker threads, and a 512 MiB heap needs no more.
# Both cost peak throughput, which test-sized loads never reach.
DEFAULT_PERFORMANCE_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LOG_TAIL_LINES = 60


# --------------------------------------------------------------------------- jars


def cache_root() -> Path:
    return Path(os.environ.get("SEQSTREAM_CACHE", "~/.cache/seqstream")).expanduser()


def _pom_sha() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:12]


def libs_dir() -> Path:
    """Where the broker jars live (or will live after fetch_jars())."""
    home = os.environ.get("KAFKA_HOME")
    if home and (Path(home) / "libs").is_dir():
        return Path(home) / "libs"
    return cache_root() / f"kafka-{KAFKA_VERSION}-{_pom_sha()}" / "libs"


def _has_jars(libs: Path) -> bool:
    return libs.is_dir() and any(libs.glob("kafka_2.13-*.jar"))


def fetch_jars() -> Path:
    """Return the jar directory, resolving it with Maven only when it is missing."""
    libs = libs_dir()
    if _has_jars(libs):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(
            f"Kafka jars are not cached at {libs} and `mvn` is not on PATH; "
            "install Maven or set KAFKA_HOME to a Kafka distribution"
        )
    libs.parent.mkdir(parents=True, exist_ok=True)
    # Resolve into a private dir and rename it into place, so that an
    # interrupted download or a concurrent fetch (pytest-xdist workers) never
    # leaves a half-filled cache behind that would count as present.
    staging = libs.parent / f"libs.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    cmd = [
        mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}", f"-Dkafka.version={KAFKA_VERSION}",
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not _has_jars(staging):
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(
            f"Maven could not fetch Kafka {KAFKA_VERSION} jars "
            f"(rc={result.returncode}):\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
        )
    try:
        staging.rename(libs)
    except OSError:
        # Another process won the race; its copy is identical.
        shutil.rmtree(staging, ignore_errors=True)
    return libs


# ----------------------------------------------------------------- configuration


def broker_properties(
    port: int, controller_port: int, data_dir: Path, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """server.properties for a one-node combined broker+controller.

    `extra` wins over the defaults. To add a listener (e.g. SASL_SSL), override
    `listeners`, `advertised.listeners` and `listener.security.protocol.map`
    together, keeping the PLAINTEXT and CONTROLLER entries.
    """
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        # Static voters instead of `format --standalone` (dynamic quorum): the
        # controller endpoint then comes from config on each start instead of
        # being frozen into the log dir when it is formatted.
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / "kraft-logs"),
        # A single node cannot meet the default replication factor of 3.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # One partition per internal topic: creating 50 __consumer_offsets
        # partitions would slow the first consumer group by seconds.
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        # Fit within -Xmx512m on a shared 2-core machine: the cleaner's dedupe
        # buffer alone is 128 MiB by default, and the thread pools size to cores.
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.segment.bytes": str(16 * 1024 * 1024),
        "log.retention.check.interval.ms": "60000",
    }
    props.update(extra or {})
    return props


def _escape(value: str) -> str:
    # java.util.Properties reads backslashes as escapes and a newline ends the value.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    lines = [f"{key}={_escape(str(value))}" for key, value in sorted(props.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def new_cluster_id() -> str:
    """Same format as `kafka-storage random-uuid`, without a JVM start (about 1 s)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        # Kafka's Uuid.randomUuid() rejects a leading '-' too, as CLIs would read it as an option.
        if not cluster_id.startswith("-"):
            return cluster_id


# ------------------------------------------------------------------------ ports


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option the JVM uses, so a port in TIME_WAIT after a restart counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def _tcp_accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def _metadata_ok(bootstrap: str, timeout: float, client_config: Mapping[str, str]) -> bool:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return True  # TCP accept already passed; that is the best we can check
    # Errors go to a logger with no handlers: during start-up they are expected noise.
    quiet = logging.getLogger("ops.kafka.launcher.probe")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({**client_config, "bootstrap.servers": bootstrap, "logger": quiet})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # KafkaException while the broker is still fenced/starting
        return False
    return bool(metadata.brokers)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java") or "java"


def _jvm_base(libs: Path, heap_opts: str) -> list[str]:
    # Same knobs as Kafka's kafka-run-class.sh, so they mean what people expect.
    perf_opts = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", DEFAULT_PERFORMANCE_OPTS)
    return [
        _java(),
        *heap_opts.split(),
        *perf_opts.split(),
        *os.environ.get("KAFKA_OPTS", "").split(),
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        "-cp",
        str(libs / "*"),
    ]


def cds_archive_path(libs: Path) -> Path:
    """AppCDS archive for the broker's classes: it cuts JVM start-up by about 3 s.

    HotSpot ignores (with a warning) an archive made by another JVM build or
    for other jar files, so the key covers the jars and the java binary. A
    change to either then builds a fresh archive instead of silently losing
    the speed-up.
    """
    java = Path(_java()).resolve()
    java_mtime = java.stat().st_mtime_ns if java.exists() else 0
    key = f"{libs.resolve()}|{libs.stat().st_mtime_ns}|{java}|{java_mtime}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_root() / "cds" / f"kafka-{KAFKA_VERSION}-{digest}.jsa"


def _cds_enabled() -> bool:
    return os.environ.get("SEQSTREAM_KAFKA_CDS", "1") != "0"


# ----------------------------------------------------------------------- broker


class KafkaBroker:
    """One KRaft broker+controller process bound to 127.0.0.1.

    Ports are fixed when the object is built (port=0 picks a free one), so
    restart() comes back on the same bootstrap address and the same data dir.
    `extra_config` may still be edited before start(); it is re-read on every start.

    A secured broker (see ops/kafka/secure.py) also needs `format_args` (e.g. `--add-scram ...`,
    used when the log dir is first formatted) and `client_config`: the librdkafka security options
    the readiness probe must use on `port`.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        extra_config: dict[str, str] | None = None,
        format_args: list[str] | None = None,
        client_config: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.extra_config: dict[str, str] = dict(extra_config or {})
        self.format_args: list[str] = list(format_args or [])
        self.client_config: dict[str, str] = dict(client_config or {})
        # A cluster's nodes share one id (ops/kafka/cluster.py); a lone broker gets a fresh one.
        self.cluster_id: str | None = None
        # JVM heap options; None = KAFKA_HEAP_OPTS, else the default.
        self.heap_opts: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0  # where the current run starts in broker.log
        self._cds_dump: tuple[Path, Path] | None = None  # (being written, final)

    # -- public API

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = 90) -> str:
        if self.is_running():
            return self.bootstrap_servers
        libs = fetch_jars()  # a cold Maven fetch does not count against the start-up timeout
        deadline = time.monotonic() + timeout
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = self.properties()
        write_properties(self.properties_path, props)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._check_ports_free()
        if not self._is_formatted(props):
            self._format(libs)
        self._spawn(libs)
        atexit.register(self.stop)
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self.bootstrap_servers

    def stop(self, timeout: float = 30) -> None:
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # The JVM leads its own process group (start_new_session), so
            # signalling the group reaches it and nothing of ours.
            self._signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(proc, signal.SIGKILL)
                proc.wait(10)
        self._finish_cds_dump(None if proc is None else proc.returncode)

    def kill(self) -> None:
        """SIGKILL, as a crashed machine would end it: no controlled shutdown, no leadership handed over."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            self._signal_group(proc, signal.SIGKILL)
            proc.wait(30)
        self._finish_cds_dump(None if proc is None else proc.returncode)

    def restart(self, timeout: float = 90) -> str:
        self.stop()
        return self.start(timeout)

    def properties(self) -> dict[str, str]:
        """server.properties as the next start() writes it."""
        return broker_properties(self.port, self.controller_port, self.data_dir, self.extra_config)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """Last lines of broker.log written by the current/last start."""
        if not self.log_path.exists():
            return "(no broker.log)"
        with self.log_path.open("rb") as fh:
            fh.seek(self._log_offset)
            text = fh.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals

    def _check_ports_free(self) -> None:
        # Without this check the probe could find some other broker on our
        # port and report success while our JVM dies on a bind error.
        for port in (self.port, self.controller_port):
            if not port_is_free(port):
                raise RuntimeError(f"cannot start Kafka: {HOST}:{port} is already in use")

    @staticmethod
    def _is_formatted(props: Mapping[str, str]) -> bool:
        return all((Path(d) / "meta.properties").exists() for d in props["log.dirs"].split(","))

    def _format(self, libs: Path) -> None:
        cmd = [
            *_jvm_base(libs, "-Xmx256m"),
            *self._cds_read_options(libs),
            "kafka.tools.StorageTool", "format",
            "-t", self.cluster_id or new_cluster_id(), "-c", str(self.properties_path), "--ignore-formatted",
            *self.format_args,
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            log.write(f"=== kafka-storage format {time.ctime()} ===\n".encode())
            log.flush()
            result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{self.log_tail()}")

    def _spawn(self, libs: Path) -> None:
        heap = self.heap_opts or os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS)
        cmd = [*_jvm_base(libs, heap), *self._cds_options(libs), "kafka.Kafka", str(self.properties_path)]
        with self.log_path.open("ab") as log:
            log.write(f"=== kafka.Kafka start {time.ctime()} port={self.port} ===\n".encode())
            log.flush()
            # A new session keeps a terminal's Ctrl-C from reaching the JVM
            # directly: we own its shutdown and want it to be a clean one.
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )

    @staticmethod
    def _cds_read_options(libs: Path) -> list[str]:
        # The broker's archive also covers most StorageTool classes.
        archive = cds_archive_path(libs)
        return [f"-XX:SharedArchiveFile={archive}"] if _cds_enabled() and archive.exists() else []

    def _cds_options(self, libs: Path) -> list[str]:
        self._cds_dump = None
        if not _cds_enabled():
            return []
        archive = cds_archive_path(libs)
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}"]
        # The JVM writes the archive when it exits. A private name, renamed
        # into place afterwards, keeps concurrent brokers from reading a
        # half-written file.
        archive.parent.mkdir(parents=True, exist_ok=True)
        pending = archive.with_name(f"{archive.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self._cds_dump = (pending, archive)
        # -Xlog: the dump lists hundreds of classes it cannot archive; harmless noise.
        return [f"-XX:ArchiveClassesAtExit={pending}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]

    def _finish_cds_dump(self, returncode: int | None) -> None:
        dump, self._cds_dump = self._cds_dump, None
        if dump is None:
            return
        pending, archive = dump
        # Only an orderly exit (0, or 128+SIGTERM from the JVM's handler)
        # finishes the dump. A cut-off archive would otherwise be kept, and
        # every start would reject it and run slow.
        if returncode in (0, 128 + signal.SIGTERM) and pending.exists():
            pending.replace(archive)
        else:
            pending.unlink(missing_ok=True)

    def _wait_ready(self, deadline: float) -> None:
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise RuntimeError(f"Kafka exited during start-up (rc={code}); {self.log_path}:\n{self.log_tail()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(
                    f"Kafka did not answer on {self.bootstrap_servers} in time; {self.log_path}:\n{self.log_tail()}"
                )
            if self._answers(remaining):
                return
            time.sleep(0.2)

    def _answers(self, remaining: float) -> bool:
        # The cheap TCP check comes first so that the client is not
        # created, and does not log, against a closed port.
        return _tcp_accepts(self.port) and _metadata_ok(
            self.bootstrap_servers, min(5.0, max(remaining, 0.5)), self.client_config
        )

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)


# -------------------------------------------------------------------------- CLI


def _cmd_fetch(_: argparse.Namespace) -> int:
    print(fetch_jars())
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stop_requested.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    broker = KafkaBroker(Path(args.data_dir), port=args.port)
    t0 = time.monotonic()
    try:
        bootstrap = broker.start(timeout=args.timeout)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"bootstrap={bootstrap}", flush=True)
    print(f"started in {time.monotonic() - t0:.1f}s; log: {broker.log_path}", file=sys.stderr)
    try:
        while not stop_requested.wait(0.5):
            if not broker.is_running():
                print(f"Kafka exited unexpectedly:\n{broker.log_tail()}", file=sys.stderr)
                return 1
    finally:
        broker.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.kafka.launcher", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="download the broker jars into the cache").set_defaults(func=_cmd_fetch)
    run = sub.add_parser("run", help="run a broker in the foreground until SIGINT/SIGTERM")
    run.add_argument("--port", type=int, default=9092, help="PLAINTEXT port (0 = any free)")
    run.add_argument(
        "--data-dir",
        default=str(cache_root() / "kafka-data"),
        help="log dirs, server.properties and broker.log (default: %(default)s)",
    )
    run.add_argument("--timeout", type=float, default=90, help="start-up timeout, seconds")
    run.set_defaults(func=_cmd_run)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
