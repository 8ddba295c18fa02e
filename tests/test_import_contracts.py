"""The import contracts in pyproject.toml hold, and `lint-imports` catches a tree that breaks them.

The broken trees are copies of this one with one import added, checked by the same command that
`ops/dev.sh test` runs, so a contract that silently stopped checking anything would fail here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tests", "ops", "streams", "model", "schemas")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    # The root packages must be found in `root` alone, not in the checkout this test runs from.
    env = {**os.environ, "PYTHONPATH": str(root)}
    # The command `ops/dev.sh test` runs, from the environment this test runs in.
    command = [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)


def copy_of_the_tree(target: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__", "*.safetensors"))
    shutil.copy(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target


def test_the_tree_keeps_its_import_contracts() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "broken"),
    [
        # The product reaching into the tooling: what made a worker need faker and matplotlib.
        ("streams/flow/pipeline.py", "import ops.cli", "streams.flow.pipeline -> ops.cli"),
        ("schemas/decode.py", "import tests.conftest", "schemas.decode -> tests.conftest"),
        # The contracts reaching up into the engine.
        ("schemas/messages.py", "import model.engine", "schemas.messages -> model.engine"),
        # A circle inside the product: routing is imported by the app it would import back.
        ("streams/flow/routing.py", "import streams.workers.faust_app", "No cycles are allowed in streams"),
        # A Kafka client reaching up into a batch's flow: the layers inside the product.
        ("streams/kafka/topics.py", "import streams.flow.pipeline", "streams.kafka.topics -> streams.flow.pipeline"),
        # The product past model/'s public face (model/__init__.py), and tooling that only runs it.
        ("streams/flow/routing.py", "import model.windows.merge", "streams.flow.routing -> model.windows.merge"),
        ("ops/stress/soak.py", "import model.runner.fast", "ops.stress.soak -> model.runner.fast"),
    ],
)
def test_a_wrong_import_breaks_a_contract(tmp_path: Path, module: str, wrong_import: str, broken: str) -> None:
    tree = copy_of_the_tree(tmp_path)
    source = tree / module
    source.write_text(source.read_text(encoding="utf-8") + f"\n{wrong_import}  # deliberately wrong\n", "utf-8")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout and broken in result.stdout, result.stdout
