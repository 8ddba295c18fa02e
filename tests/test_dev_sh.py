"""`ops/dev.sh run CMD` runs CMD on this checkout's code, prints only what CMD prints, and leaves the
cached environment, which every clone on the machine shares, as it found it: re-pointing its editable
install at the clone that ran last switched a run still going in another clone onto that clone's code."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WHERE = "import model, streams; print(model.__file__); print(streams.__file__); print(sys.prefix)"


def _installed_url() -> str:
    # The installed distribution, not the seqstream.egg-info setuptools leaves in the checkout.
    [installed] = importlib.metadata.distributions(name="seqstream", path=[sysconfig.get_paths()["purelib"]])
    return json.loads(installed.read_text("direct_url.json") or "{}")["url"]


def _where(checkout: Path) -> list[str]:
    # PYTHON and SEQSTREAM_CACHE name this very environment, so dev.sh finds it instead of building one.
    env = {**os.environ, "PYTHON": sys.executable, "SEQSTREAM_CACHE": str(Path(sys.prefix).parent)}
    env.pop("PYTHONPATH", None)
    command = [str(checkout / "ops" / "dev.sh"), "run", "python", "-c", f"import sys; {WHERE}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.split()


@pytest.mark.skipif(
    not (Path(sys.prefix) / ".complete").exists(), reason="runs inside the environment ops/dev.sh built"
)
def test_two_clones_share_the_environment_and_each_runs_its_own_code(tmp_path: Path) -> None:
    before = _installed_url()
    # Another clone, as far as dev.sh and these imports can tell: its own dev.sh, the same
    # pyproject.toml (so the same cached environment), its own packages.
    other = tmp_path / "other-clone"
    (other / "ops").mkdir(parents=True)
    shutil.copy2(REPO / "ops" / "dev.sh", other / "ops" / "dev.sh")
    shutil.copy2(REPO / "pyproject.toml", other / "pyproject.toml")
    for package in ("model", "streams"):
        (other / package).mkdir()
        (other / package / "__init__.py").write_text("")
    for checkout in (other, REPO, other):
        model, streams, prefix = _where(checkout)
        assert Path(model).is_relative_to(checkout.resolve()), model
        assert Path(streams).is_relative_to(checkout.resolve()), streams
        assert prefix == sys.prefix, "dev.sh ran the command in another environment"
    assert _installed_url() == before
