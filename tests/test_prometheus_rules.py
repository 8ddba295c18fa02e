"""The alert rules (ops/prometheus/alerts.yml) under promtool: valid, loaded by prometheus.yml, and
each one unit-tested (ops/prometheus/tests/*.yml) firing where it must and quiet on a near miss."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.prometheus_fixture import ROOT, RULE_TESTS, RULES, binary

CONFIG = ROOT / "ops" / "prometheus" / "prometheus.yml"
# For workers and sinks started by hand (README, "Monitoring by hand"): targets from files, not DNS.
BY_HAND = ROOT / "ops" / "prometheus" / "by-hand.yml"


def _promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("promtool"), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("config", [CONFIG, BY_HAND], ids=lambda p: p.name)
def test_config_and_rules_are_valid(config: Path) -> None:
    # `check config` also checks every rule file the config names: the rules are loaded, not just valid.
    result = _promtool("check", "config", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{RULES.name}" in result.stdout + result.stderr


def test_the_by_hand_config_scrapes_what_the_compose_one_does() -> None:
    compose, by_hand = (yaml.safe_load(p.read_text()) for p in (CONFIG, BY_HAND))
    assert by_hand["rule_files"] == compose["rule_files"]

    def jobs(config: dict) -> dict[str, str]:
        return {j["job_name"]: j["metrics_path"] for j in config["scrape_configs"]}

    assert jobs(by_hand) == jobs(compose)
    assert all(j["file_sd_configs"] for j in by_hand["scrape_configs"])


def test_rule_unit_tests_pass() -> None:
    files = sorted(RULE_TESTS.glob("*.yml"))
    assert files, f"no rule tests in {RULE_TESTS}"
    result = _promtool("test", "rules", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_is_tested_firing_and_quiet() -> None:
    rules = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    fired: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS.glob("*.yml"):
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert rules and len(rules) == len(set(rules))
    assert not set(rules) - fired, f"never seen firing in a unit test: {sorted(set(rules) - fired)}"
    assert not set(rules) - quiet, f"never seen quiet in a unit test: {sorted(set(rules) - quiet)}"
    assert not (fired | quiet) - set(rules), f"tests of rules that do not exist: {sorted((fired | quiet) - set(rules))}"


def test_missing_promtool_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="apt-get install prometheus"):
        binary("promtool")
