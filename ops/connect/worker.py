"""A Kafka Connect worker (standalone mode) from Maven Central jars, running `jdbc-sink.json`: the
fields topic into PostgreSQL through Debezium's JDBC sink, beside `seqstream sink postgres`.

    python -m ops.connect.worker fetch     # the worker's jars and the connector plugin, cached

The jars are resolved once with Maven into the cache (keyed on the two POMs), as the broker's are
(ops/kafka/launcher.py). `tables_ddl` makes what the connector writes readable by the README's BI
queries: its table (`schema.evolution` is off, so the table must exist) and the `doc_fields` and
`field_values` views the native sink has, over it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ops.kafka.launcher import _java, cache_root
from ops.stress.worker_process import free_port, http_get
from streams.sinks.postgres_sql import FIELD_VALUES_VIEW

HERE = Path(__file__).resolve().parent
POM, PLUGIN_POM, MAVEN_SETTINGS = HERE / "pom.xml", HERE / "plugin-pom.xml", HERE / "maven-settings.xml"
CONNECTOR = HERE / "jdbc-sink.json"
LOG4J_CONFIG = HERE.parent / "kafka" / "log4j2.xml"
TABLE = "doc_fields_connect"


def jar_dirs() -> tuple[Path, Path]:
    """(the worker's classpath folder, the plugin path), resolved with Maven where not cached."""
    digest = hashlib.sha256(POM.read_bytes() + PLUGIN_POM.read_bytes()).hexdigest()[:12]
    root = cache_root() / f"connect-{digest}"
    libs, plugins = root / "libs", root / "plugins"
    if not (libs.is_dir() and (plugins / "debezium-jdbc").is_dir()):
        root.mkdir(parents=True, exist_ok=True)
        # Into a private folder, renamed into place: an interrupted fetch never counts as present.
        staging = root / f"tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        _maven(POM, staging / "libs")
        _maven(PLUGIN_POM, staging / "plugins" / "debezium-jdbc")
        for part in ("libs", "plugins"):
            with contextlib.suppress(OSError):  # another process won the race; its copy is identical
                (staging / part).rename(root / part)
        shutil.rmtree(staging, ignore_errors=True)
    return libs, plugins


def _maven(pom: Path, into: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"the Kafka Connect jars are not cached and `mvn` is not on PATH (needed for {pom.name})")
    cmd = [mvn, "-q", "-B", "-s", str(MAVEN_SETTINGS), "-f", str(pom), "dependency:copy-dependencies"]
    result = subprocess.run([*cmd, f"-DoutputDirectory={into}"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"Maven could not fetch {pom.name} (rc={result.returncode}):\n{result.stdout[-4000:]}")


def connector(bootstrap_topic: str, jdbc_url: str, user: str, password: str, **overrides: str) -> dict[str, Any]:
    """jdbc-sink.json as shipped, pointed at a topic and a database."""
    config = json.loads(CONNECTOR.read_text())
    config["config"] |= {
        "topics": bootstrap_topic,
        "connection.url": jdbc_url,
        "connection.username": user,
        "connection.password": password,
        **overrides,
    }
    return config


def tables_ddl(schema: str) -> str:
    """The connector's table and, over it, the native sink's two names: the BI queries read either."""
    return f"""
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.{TABLE} (doc_id text PRIMARY KEY, record jsonb NOT NULL);
CREATE OR REPLACE VIEW {schema}.doc_fields AS SELECT doc_id, record FROM {schema}.{TABLE};
""" + FIELD_VALUES_VIEW.format(schema=schema)


class ConnectWorker:
    """`ConnectStandalone` with one connector, in a folder of its own, until stopped."""

    def __init__(self, folder: Path, bootstrap: str, connector_config: dict[str, Any]) -> None:
        self.folder = folder
        self.port = free_port()
        libs, plugins = jar_dirs()
        properties = {
            "bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": str(folder / "connect.offsets"),
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(plugins),
            "listeners": f"http://127.0.0.1:{self.port}",
        }
        (folder / "worker.properties").write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        (folder / "connector.json").write_text(json.dumps(connector_config))
        self.name = connector_config["name"]
        self.command = [
            _java(),
            "-Xms128m",
            "-Xmx512m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp",
            str(libs / "*"),
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(folder / "worker.properties"),
            str(folder / "connector.json"),
        ]
        self.log_path = folder / "connect.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120) -> None:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while self.task_state() != "RUNNING":
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the connector's task is not running ({self.task_state()}):\n{self.log_tail()}")
            time.sleep(1)

    def task_state(self) -> str | None:
        """The task's state as the worker's REST API says (`RUNNING`, `FAILED` ...), None before it answers."""
        status, body = http_get(f"http://127.0.0.1:{self.port}/connectors/{self.name}/status")
        tasks = json.loads(body).get("tasks", []) if status == 200 else []
        return tasks[0]["state"] if tasks else None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m ops.connect.worker fetch")
    print(*jar_dirs(), sep="\n")
