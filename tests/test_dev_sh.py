"""`ops/dev.sh run CMD` prints only what CMD prints: the re-pointing of the cached environment's
editable install at this checkout used to print setuptools' editable-install warning on every call."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    not (Path(sys.prefix) / ".complete").exists(), reason="runs inside the environment ops/dev.sh built"
)
def test_dev_sh_run_is_quiet_and_leaves_the_editable_install_pointing_here() -> None:
    # PYTHON and SEQSTREAM_CACHE name this very environment, so dev.sh finds it instead of building one.
    env = {**os.environ, "PYTHON": sys.executable, "SEQSTREAM_CACHE": str(Path(sys.prefix).parent)}
    command = [str(REPO / "ops" / "dev.sh"), "run", "python", "-c", "import sys; print(sys.prefix)"]
    for _ in range(2):  # the first call may re-point the install, the second finds it pointing here
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == sys.prefix, "dev.sh ran the command in another environment"
        assert done.stderr == ""
    # The installed distribution, not the seqstream.egg-info setuptools leaves in the checkout.
    [installed] = importlib.metadata.distributions(name="seqstream", path=[sysconfig.get_paths()["purelib"]])
    assert json.loads(installed.read_text("direct_url.json") or "{}")["url"] == REPO.resolve().as_uri()
