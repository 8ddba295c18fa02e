"""`seqstream worker` on the default data directory, started outside the checkout: Faust's state
goes to the user's cache, made with its parents. The default was `var/faust` under the working
directory, and a worker started anywhere without a `var/` died at start-up (FileNotFoundError)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ops.stress.worker_process import WorkerProcess, free_port, isolated_settings
from streams.settings import default_data_dir, load_settings

REPO = Path(__file__).resolve().parents[1]


def test_the_default_data_dir_is_in_the_user_s_cache() -> None:
    assert default_data_dir({"XDG_CACHE_HOME": "/c"}) == "/c/seqstream/faust"
    assert default_data_dir({}) == os.path.expanduser("~/.cache/seqstream/faust")
    # The variable still wins over the default.
    assert load_settings({"SEQSTREAM_WORKER__DATA_DIR": "/srv/faust"}).worker.data_dir == "/srv/faust"


@pytest.mark.timeout(300)
def test_a_worker_starts_from_a_fresh_directory_on_the_default_data_dir(
    kafka_bootstrap: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    _, env = isolated_settings(kafka_bootstrap, tiny_model_dir, tmp_path / "unused")
    del env["SEQSTREAM_WORKER__DATA_DIR"]
    port = free_port()
    cache = tmp_path / "home" / ".cache"  # does not exist yet: the worker makes every parent
    env |= {
        "SEQSTREAM_WORKER__WEB_PORT": str(port),
        "XDG_CACHE_HOME": str(cache),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    worker = WorkerProcess(env, tmp_path / "worker.log", cwd=cwd)
    worker.start()
    try:
        worker.wait_ready(port, timeout_s=240)
    finally:
        worker.stop()
    assert (cache / "seqstream" / "faust").is_dir()
    assert not (cwd / "var").exists()
