"""A worker installed without the `tools` extra: the product never needs faker or matplotlib, and the
tooling says which extra it lacks instead of a traceback.

Each check runs in a fresh interpreter in which importing those packages fails, as it would where
they are not installed.
"""

from __future__ import annotations

import subprocess
import sys

TOOLS_BLOCKED = "import sys; sys.modules.update(faker=None, matplotlib=None); "


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", TOOLS_BLOCKED + code], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_product_imports_and_its_cli_runs_without_the_tools() -> None:
    result = python(
        "import streams.workers.faust_app, streams.workers.transactional, streams.flow.driver, streams.cli.main, "
        "model.engine, schemas.decode; "
        "sys.argv = ['seqstream', 'worker', '--help']; streams.cli.main.main()"
    )
    assert result.returncode == 0, result.stderr
    assert "Consume the raw topic" in result.stdout


def test_the_tooling_names_the_extra_it_lacks(tmp_path) -> None:
    out = tmp_path / "corpus.jsonl"
    result = python(
        f"from ops.cli import main; sys.argv = ['seqstream-ops', 'corpus', 'generate', '-o', {str(out)!r}]; main()"
    )
    assert result.returncode == 1
    assert "pip install 'seqstream[tools]'" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()
