#!/usr/bin/env bash
# The GPU check, for a lent machine with no network: its own python3 with torch and transformers,
# plus the wheels in .whl/ (msgspec; see the device tool's README for the `pip download` recipe).
#   ops/bench/gpu_check.sh [--docs N --new-tokens N --batches 1,8,32,128]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
# Where a step's time goes on this device: the model's own time and the host's around it, per engine
# (a compute-free BLOOM: what is left is what keeps the GPU idle), at the tokenizer's size and SeqGPT's.
PYTHONUNBUFFERED=1 python3 -m ops.bench.engine --shape overhead --docs 64 --batch 64 --no-reference --json /tmp/overhead.json
PYTHONUNBUFFERED=1 python3 -m ops.bench.engine --shape overhead --docs 64 --batch 64 --no-reference --vocab 250880
PYTHONUNBUFFERED=1 python3 -m ops.bench.gpu "$@"
