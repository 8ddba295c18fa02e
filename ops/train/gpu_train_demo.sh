#!/usr/bin/env bash
# Train the demo model on a lent GPU machine in one call of the device tool, within a time budget,
# and bring the snapshots back under $OUT (the product, the export and the evaluation stay here).
# The machine has torch, transformers, tokenizers and numpy; the training also imports faker,
# msgspec and click: their wheels go in .whl/ (see the device tool's README, `pip download`), and
# jieba (the open-vocabulary documents' names and places, ops/corpus/open_vocab.py), which PyPI
# ships as a source archive only: copy its installed package folder to .whl/site/jieba/.
#   ops/train/gpu_train_demo.sh SECONDS [demo-model build options: --batch-tokens --hidden --layers ...]
# A probe of PROBE_STEPS steps turns SECONDS into a step count, so the cosine schedule ends inside
# the budget (stopping a run early with --stop-after would leave the learning rate high).
set -euo pipefail
cd "$(dirname "$0")/../.."
budget=${1:?seconds of training}
shift
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
if [ -d .whl/site ]; then
  export PYTHONPATH=$PWD/.whl/site:${PYTHONPATH:-}
fi
python3 -c "import jieba" || { echo "jieba is missing: copy its package folder to .whl/site/jieba/" >&2; exit 1; }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=$PWD:${PYTHONPATH:-}
out=${OUT:-/tmp/demo-out}
mkdir -p "$out"
train=/tmp/demo-train
probe_steps=${PROBE_STEPS:-60}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
rm -rf /tmp/demo-probe
python3 -m ops.cli demo-model build --train-dir /tmp/demo-probe --steps "$probe_steps" "$@"
steps=$(python3 - "$budget" "$probe_steps" <<'EOF'
import json, sys
budget, probe = float(sys.argv[1]), int(sys.argv[2])
seconds = json.load(open(f"/tmp/demo-probe/step-{probe:06d}/seqstream-model.json"))["train_seconds"]
# The probe's time includes the first steps' warm-up: the estimate errs towards fewer steps.
print(max(100, int(budget / (seconds / probe)) // 100 * 100))
EOF
)
echo "probe: $probe_steps steps; training $steps steps in about $budget s"
python3 -m ops.cli demo-model build --train-dir "$train" --steps "$steps" "$@" | tee "$out/train.log"
# The device tool brings back at most 8 files of 16 MiB: one archive per snapshot, the last two.
for snapshot in $(ls -d "$train"/step-* | tail -n 2); do
  tar czf "$out/$(basename "$snapshot").tgz" -C "$train" "$(basename "$snapshot")"
done
tar czf "$out/tokenizer.tgz" -C "$train" tokenizer
ls -la "$out"
