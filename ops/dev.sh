#!/usr/bin/env bash
# The README's two commands, from a fresh clone:
#   ops/dev.sh demo [seqstream-ops demo options]   broker, topics, worker, sample documents, results
#   ops/dev.sh test [pytest options]               lint and import contracts, then the whole test suite on a real broker
# and `ops/dev.sh run CMD...` to run anything inside the project's environment.
#
# The virtualenv is cached under $SEQSTREAM_CACHE (default ~/.cache/seqstream), keyed by
# pyproject.toml and the Python version: torch alone is a few GB, installed once per machine.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CACHE=${SEQSTREAM_CACHE:-$HOME/.cache/seqstream}
key=$( (cat pyproject.toml; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
VENV="$CACHE/venv-$key"

if [ ! -f "$VENV/.complete" ]; then
  echo "setting up the Python environment in $VENV (once per machine; torch is large)" >&2
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip setuptools
  "$VENV/bin/pip" install -q -e ".[dev,tools]"
  touch "$VENV/.complete"
fi
export PATH="$VENV/bin:$PATH"
# The environment is shared by every clone on the machine, and its editable install points at the
# clone that built it. This clone's code comes first on the path instead, for this command and every
# process it starts: re-pointing the shared install here would switch a run still going in another
# clone (its workers, its console scripts) onto this clone's code.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false

command=${1:-}
shift || true
case "$command" in
  demo)
    exec seqstream-ops demo "$@"
    ;;
  test)
    # Tests run several torch processes at once (pytest, workers, a broker) on few cores; one
    # thread each avoids OpenMP spin-waiting against each other (8x faster, measured on 2 cores).
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
    python -m ops.kafka.launcher fetch >/dev/null
    # The alert rules' tests run promtool and a real Prometheus; without them they fail, saying why.
    if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
      echo "warning: no prometheus/promtool on PATH; the monitoring tests (tests/test_prometheus_*.py)" \
        "will fail: apt-get install prometheus" >&2
    fi
    ruff check .
    ruff format --check .
    lint-imports
    exec python -m pytest "$@"
    ;;
  run)
    exec "$@"
    ;;
  *)
    echo "usage: ops/dev.sh demo|test|run CMD..." >&2
    exit 2
    ;;
esac
