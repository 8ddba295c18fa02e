"""The Grafana dashboard and Prometheus config, held to the metrics the worker actually exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from streams import metrics
from tests.test_compose import COMPOSE_FILE, command, environment

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "ops" / "grafana" / "dashboards" / "seqstream.json"
DATASOURCES = ROOT / "ops" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
DASHBOARD_PROVIDERS = ROOT / "ops" / "grafana" / "provisioning" / "dashboards" / "seqstream.yml"
PROMETHEUS = ROOT / "ops" / "prometheus" / "prometheus.yml"

PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "and",
    "or",
    "unless",
    "inf",
    "nan",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions, keywords,
    label names (inside `{}` or `by (...)`), durations or Grafana variables."""
    text = _VARIABLE.sub(" ", _STRING.sub(" ", expr))
    text = _GROUPING.sub(" ", _RANGE.sub(" ", _MATCHERS.sub(" ", text)))
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in PROMQL_KEYWORDS}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("sum by (outcome) (rate(seqstream_outputs_total[$__rate_interval]))", {"seqstream_outputs_total"}),
        (
            'histogram_quantile(0.95, sum by (le, stage) (rate(seqstream_stage_seconds_bucket{stage!="queue"}[5m])))',
            {"seqstream_stage_seconds_bucket"},
        ),
        ("a_total / on (job) group_left b_info offset 5m", {"a_total", "b_info"}),
        ("process_resident_memory_bytes / 2^30 > bool 1e3", {"process_resident_memory_bytes"}),
    ],
)
def test_metric_names_reads_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def _families() -> list:
    """The worker's metric families and the PostgreSQL sink's (a process and a registry of its own)."""
    return [*metrics.REGISTRY.collect(), *metrics.SINK_REGISTRY.collect(), *metrics.REVIEW_REGISTRY.collect()]


def test_dashboard_queries_only_exported_metrics() -> None:
    exported = metrics.exported_series(_families())
    used = set().union(*(metric_names(expr) for expr in dashboard_expressions()))
    assert used, "the dashboard has no queries"
    assert used <= exported, f"not exported by the worker: {sorted(used - exported)}"


def test_dashboard_shows_every_seqstream_metric() -> None:
    used = set().union(*(metric_names(expr) for expr in dashboard_expressions()))
    families = [f for f in _families() if f.name.startswith("seqstream_")]
    unused = [f.name for f in families if not any(name.startswith(f.name) for name in used)]
    assert not unused, f"metrics no panel shows: {unused}"


def test_dashboard_filters_shared_metrics_by_job() -> None:
    """process_* (and any metric not named seqstream_*) is exported by every Prometheus target,
    Prometheus itself included: a panel must select the workers' own."""
    for expr in dashboard_expressions():
        for name in metric_names(expr) - {n for n in metric_names(expr) if n.startswith("seqstream_")}:
            selectors = re.findall(rf"\b{name}\s*(\{{[^}}]*\}})?", expr)
            assert all('job="seqstream-worker"' in s for s in selectors), (name, expr)


def test_dashboard_uses_the_provisioned_datasource() -> None:
    datasource = yaml.safe_load(DATASOURCES.read_text())["datasources"][0]
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == datasource["uid"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == datasource["uid"], panel["title"]
    assert [p["id"] for p in dashboard["panels"]] == list(range(1, len(dashboard["panels"]) + 1))


def test_prometheus_scrapes_the_workers_metrics_path() -> None:
    config = yaml.safe_load(PROMETHEUS.read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "seqstream-worker"]
    assert job["metrics_path"] == "/metrics"
    provider = yaml.safe_load(DASHBOARD_PROVIDERS.read_text())["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"]


def _mounts(service: dict) -> dict[str, Path]:
    """Container path -> host path (relative to the repository) of a service's bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            mounts[target] = ROOT / source
    return mounts


def test_compose_runs_prometheus_and_grafana_on_these_files() -> None:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]

    # The config's folder is mounted whole, so that its rule files (relative paths) come along.
    config_flag = next(arg for arg in command(prometheus) if arg.startswith("--config.file="))
    config_in_container = Path(config_flag.partition("=")[2])
    assert _mounts(prometheus)[str(config_in_container.parent)] / config_in_container.name == PROMETHEUS
    for rule_file in yaml.safe_load(PROMETHEUS.read_text())["rule_files"]:
        assert (PROMETHEUS.parent / rule_file).is_file(), rule_file

    grafana_mounts = _mounts(grafana)
    assert grafana_mounts["/etc/grafana/provisioning"] == DATASOURCES.parent.parent
    provider_path = yaml.safe_load(DASHBOARD_PROVIDERS.read_text())["providers"][0]["options"]["path"]
    assert (grafana_mounts[provider_path] / DASHBOARD.name).is_file()
    datasource = yaml.safe_load(DATASOURCES.read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"
    assert "prometheus" in grafana["depends_on"]
    for name in ("prometheus", "grafana"):
        assert all(str(p).startswith("127.0.0.1:") for p in services[name]["ports"]), name


def test_prometheus_scrapes_the_port_the_worker_serves() -> None:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    (job,) = [
        j for j in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"] if j["job_name"] == "seqstream-worker"
    ]
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["worker"] and "worker" in services
    assert environment(services["worker"])["SEQSTREAM_WORKER__WEB_PORT"] == str(sd["port"])


def test_readme_metrics_table_lists_every_metric() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"^\| `(seqstream_\w+)", readme, re.MULTILINE))
    exported = {f.name + {"counter": "_total", "info": "_info"}.get(f.type, "") for f in _families()}
    missing = {name for name in exported if name.startswith("seqstream_")} - listed
    assert not missing, f"exported but not in the README's metrics table: {sorted(missing)}"
