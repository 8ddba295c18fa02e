"""Debian's Prometheus and promtool for the tests: a server in a temporary folder, on a free port.

Where the binaries are missing the tests that need them fail and say what to install (as the
PostgreSQL sink's tests do): a skipped alert test would hide that the rules went unchecked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.stress.worker_process import free_port, http_get

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "ops" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "ops" / "prometheus" / "tests"
INSTALL_HINT = "apt-get install prometheus (Debian's package brings both `prometheus` and `promtool`)"


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`; fails the test, saying how to install it, when missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH: {INSTALL_HINT}", pytrace=False)
    return path


class PrometheusServer:
    """One Prometheus with `config` (prometheus.yml as a dict) and `rules` (alerts.yml as a dict)."""

    def __init__(self, directory: Path, config: dict[str, Any], rules: dict[str, Any]) -> None:
        self.directory = directory
        self.port = free_port()
        (directory / "alerts.yml").write_text(yaml.safe_dump(rules))
        # Prometheus scrapes itself as well, as the usual setups do: its own process_* series then
        # sit next to the workers', and a query without a job filter shows both.
        self_scrape = {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{self.port}"]}]}
        config = {**config, "scrape_configs": [*config["scrape_configs"], self_scrape], "rule_files": ["alerts.yml"]}
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log_path = directory / "prometheus.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> None:
        command = [
            binary("prometheus"),
            f"--config.file={self.directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while http_get(f"{self.url}/-/ready")[0] != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"Prometheus did not become ready:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def api(self, path: str, **params: str) -> dict[str, Any]:
        """The `data` of an /api/v1 answer; an error answer fails with Prometheus's message."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        status, body = http_get(f"{self.url}/api/v1/{path}{query}")
        answer = json.loads(body) if body else {}
        if status != 200 or answer.get("status") != "success":
            raise AssertionError(f"/api/v1/{path} {params}: {status} {answer.get('error', body[:300])}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's series (a vector; a scalar answer comes back as one unlabelled series)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "vector":
            return data["result"]
        return [{"metric": {}, "value": data["result"]}]

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.api("alerts")["alerts"] if a["state"] == "firing"}
