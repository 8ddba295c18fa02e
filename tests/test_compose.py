"""docker-compose.yml, the worker's Dockerfile and .dockerignore, checked as files: no Docker needed.

No Docker engine runs where the tests run, so a broken compose file would otherwise go unnoticed
until someone deploys it. These checks hold the file to what the worker actually reads.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from streams.settings import ENV_PREFIX, load_settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "ops" / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

# `${NAME}`, `${NAME:-default}`, `${NAME-default}`, `${NAME:?error}`, `${NAME?error}`.
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
DURATION_PART = re.compile(r"(?P<amount>\d+(?:\.\d+)?)(?P<unit>ms|us|ns|h|m|s)")
DURATION_UNITS_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def interpolate(value: str) -> str:
    """The value as Compose sees it with no variable set: every `${NAME:-default}` is its default.

    A variable without a default would make `docker compose up` depend on the caller's shell, so
    it is an error here.
    """

    def default(match: re.Match[str]) -> str:
        if match["op"] not in (":-", "-"):
            raise ValueError(f"{match[0]} has no default")
        return match["arg"]

    return INTERPOLATION.sub(default, value).replace("$$", "$")


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment, interpolated; Compose allows a mapping or a list of NAME=VALUE."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    # YAML turns `KAFKA_NODE_ID: 1` into an int; the container receives the string.
    return {name: interpolate(str(value)) for name, value in raw.items()}


def command(service: dict[str, Any]) -> list[str]:
    raw = service.get("command")
    return shlex.split(raw) if isinstance(raw, str) else list(raw or [])


def seconds(duration: str) -> float:
    parts = list(DURATION_PART.finditer(duration))
    if not parts or "".join(p[0] for p in parts) != duration:
        raise ValueError(f"not a Compose duration: {duration!r}")
    return sum(float(p["amount"]) * DURATION_UNITS_S[p["unit"]] for p in parts)


def listeners(spec: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` as {NAME: (host, port)}; an empty host means every interface."""
    result = {}
    for entry in spec.split(","):
        name, _, address = entry.strip().partition("://")
        host, _, port = address.rpartition(":")
        result[name] = (host, int(port))
    return result


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        # Docker drops comment lines even inside a continued instruction.
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def dockerfile_env(instructions: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, arguments in instructions:
        if keyword != "ENV":
            continue
        tokens = shlex.split(arguments)
        if "=" not in tokens[0]:
            # The legacy `ENV NAME value with spaces` form.
            env[tokens[0]] = " ".join(tokens[1:])
        else:
            env.update(token.split("=", 1) for token in tokens)
    return env


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    # safe_load resolves the `<<: *anchor` merges the file uses, as Compose does.
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def kafka_env(services: dict[str, dict[str, Any]]) -> dict[str, str]:
    return environment(services["kafka"])


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))


def test_the_three_services_exist(services: dict[str, dict[str, Any]]) -> None:
    assert {"kafka", "topics", "worker"} <= set(services)


def test_kafka_is_a_single_kraft_node(services: dict[str, dict[str, Any]], kafka_env: dict[str, str]) -> None:
    image = services["kafka"]["image"]
    repository, _, tag = image.partition(":")
    assert repository == "apache/kafka", image
    # KRaft without ZooKeeper, and share groups' coordinator settings, need Kafka 4.
    assert tag.split(".")[0].isdigit() and int(tag.split(".")[0]) >= 4, image
    assert set(kafka_env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any("ZOOKEEPER" in name for name in kafka_env)
    node_id = kafka_env["KAFKA_NODE_ID"]
    controller = kafka_env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    voters = kafka_env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert len(voters) == 1 and voters[0].startswith(f"{node_id}@"), voters
    # The one voter is this node, reached on its own controller listener.
    assert int(voters[0].rpartition(":")[2]) == listeners(kafka_env["KAFKA_LISTENERS"])[controller][1]


def test_kafka_internal_state_fits_one_broker(kafka_env: dict[str, str]) -> None:
    # A replication factor above 1 on one broker leaves consumer groups and transactions unusable.
    for name in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR",
    ):
        assert kafka_env.get(name) == "1", name
    assert kafka_env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
    # `topics create` sets retention and compaction; a topic auto-created by a typo would not have them.
    assert kafka_env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_kafka_listeners_serve_containers_and_the_host(
    services: dict[str, dict[str, Any]], kafka_env: dict[str, str]
) -> None:
    bound = listeners(kafka_env["KAFKA_LISTENERS"])
    advertised = listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"])
    protocols = dict(entry.split(":") for entry in kafka_env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(bound) <= set(protocols)
    assert advertised["PLAINTEXT"] == ("kafka", bound["PLAINTEXT"][1])
    assert advertised["EXTERNAL"] == ("localhost", 9094)
    assert kafka_env["KAFKA_CONTROLLER_LISTENER_NAMES"] not in advertised
    published = [str(port).rsplit(":", 2)[-2:] for port in services["kafka"].get("ports", [])]
    assert [str(advertised["EXTERNAL"][1]), str(bound["EXTERNAL"][1])] in published


def test_kafka_has_a_healthcheck_and_keeps_its_data(compose: dict[str, Any], kafka_env: dict[str, str]) -> None:
    kafka = compose["services"]["kafka"]
    test = kafka["healthcheck"]["test"]
    test = shlex.split(test) if isinstance(test, str) else test
    assert test[0] in ("CMD", "CMD-SHELL")
    assert "/opt/kafka/bin/kafka-broker-api-versions.sh" in " ".join(test)
    bootstrap = test[test.index("--bootstrap-server") + 1]
    assert bootstrap == f"localhost:{listeners(kafka_env['KAFKA_LISTENERS'])['PLAINTEXT'][1]}"
    # A named volume at the log directory: topics and offsets survive `docker compose down`.
    log_dir = kafka_env["KAFKA_LOG_DIRS"]
    mounts = {target: source for source, target, *_ in (volume.split(":") for volume in kafka["volumes"])}
    assert mounts.get(log_dir) in (compose.get("volumes") or {}), kafka["volumes"]


def test_topics_are_created_once_kafka_is_healthy(services: dict[str, dict[str, Any]]) -> None:
    topics = services["topics"]
    assert command(topics) == ["topics", "create"]
    assert topics["depends_on"]["kafka"]["condition"] == "service_healthy"
    # Quoted in YAML: a bare `no` is the boolean false, which Compose rejects as a restart policy.
    assert topics["restart"] == "no"
    assert topics["image"] == services["worker"]["image"]


def test_worker_starts_after_kafka_and_the_topics(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    assert command(worker) == ["worker"]
    assert worker["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert worker["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    assert worker["restart"] == "unless-stopped"
    # SIGTERM lets the batch in flight finish and commit; Compose's default 10 s may cut it short.
    assert seconds(worker["stop_grace_period"]) >= 60


def test_worker_reserves_nvidia_gpus(services: dict[str, dict[str, Any]]) -> None:
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    gpus = [d for d in devices if d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", [])]
    assert len(gpus) == 1, devices
    # Docker turns `count: N` into GPUs 0..N-1, so only `all` lets CUDA_VISIBLE_DEVICES choose
    # the GPU of each worker; `count: 1` would put every worker on GPU 0.
    assert gpus[0].get("count") == "all" and "device_ids" not in gpus[0], gpus[0]


def test_worker_picks_its_gpu(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    assert environment(worker)["CUDA_VISIBLE_DEVICES"] == "0"
    assert worker["environment"]["CUDA_VISIBLE_DEVICES"].startswith("${CUDA_VISIBLE_DEVICES"), (
        "the host's CUDA_VISIBLE_DEVICES should choose the GPU"
    )


@pytest.mark.parametrize("name", ["topics", "worker"])
def test_pipeline_services_use_kafkas_internal_listener(
    services: dict[str, dict[str, Any]], kafka_env: dict[str, str], name: str
) -> None:
    host, port = listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"])["PLAINTEXT"]
    assert host in services
    assert environment(services[name])["SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS"] == f"{host}:{port}"


def test_worker_loads_the_model_from_the_mounted_directory(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    volumes = [interpolate(v).split(":") for v in worker["volumes"]]
    models = [v for v in volumes if v[1] == "/models"]
    assert models and models[0][2:] == ["ro"], worker["volumes"]
    assert environment(worker)["SEQSTREAM_MODEL__PATH"].startswith("/models/")


def test_builds_point_at_existing_dockerfiles(services: dict[str, dict[str, Any]]) -> None:
    built = {name: s["build"] for name, s in services.items() if "build" in s}
    assert "worker" in built
    for name, build in built.items():
        context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
        dockerfile = context / ("Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile"))
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
    assert ROOT / built["worker"]["context"] / built["worker"]["dockerfile"] == DOCKERFILE


def test_every_seqstream_variable_is_a_settings_field(
    services: dict[str, dict[str, Any]], instructions: list[tuple[str, str]]
) -> None:
    named = [(f"service {name}", environment(service)) for name, service in services.items()]
    named.append(("the Dockerfile", dockerfile_env(instructions)))
    checked, problems = 0, []
    for where, env in named:
        for variable, value in env.items():
            if not variable.startswith(ENV_PREFIX):
                continue
            checked += 1
            try:
                # Raises ValueError for an unknown section or field, or a value of the wrong type.
                load_settings({variable: value})
            except ValueError as exc:
                problems.append(f"{where}: {variable}={value!r}: {exc}")
    assert not problems, "\n".join(problems)
    assert checked >= 3


def test_dockerfile_runs_seqstream_as_an_unprivileged_user(instructions: list[tuple[str, str]]) -> None:
    # The last of each instruction is the one in force.
    last = dict(instructions)
    assert instructions[0][0] in ("FROM", "ARG")
    assert last["FROM"].startswith("python:3.11-slim")
    # Exec form: seqstream is PID 1 and receives the SIGTERM that stops it cleanly.
    entrypoint = json.loads(last["ENTRYPOINT"])
    assert entrypoint == ["seqstream"]
    assert json.loads(last["CMD"]) == ["worker"]
    user = last["USER"].split(":")[0]
    assert user not in ("root", "0")
    assert dockerfile_env(instructions)["HF_HOME"] == "/models/hf"


def test_dockerfile_installs_dependencies_before_copying_the_source(instructions: list[tuple[str, str]]) -> None:
    copies = [(i, shlex.split(arguments)) for i, (keyword, arguments) in enumerate(instructions) if keyword == "COPY"]
    first_install = next(i for i, (keyword, arguments) in enumerate(instructions) if "pip install" in arguments)
    pyproject_copy = next(i for i, sources in copies if "pyproject.toml" in sources[:-1])
    source_copies = [(i, Path(sources[0]).name) for i, sources in copies if "pyproject.toml" not in sources[:-1]]
    assert pyproject_copy < first_install < min(i for i, _ in source_copies), instructions
    # Every package the wheel is built from must reach the image, or `pip install .` leaves it out.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {name for _, name in source_copies}
    assert packages <= copied, f"copied: {sorted(copied)}, packaged: {sorted(packages)}"


def test_dockerignore_keeps_local_state_out_of_the_context() -> None:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    # Docker cleans each pattern as a path: `var/`, `/var` and `var` exclude the same directory.
    patterns = {line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")}
    # The model directory too: gigabytes of weights sent with every build otherwise.
    assert {".venv", "var", ".git", "models"} <= patterns, patterns
