#!/usr/bin/env bash
# The GPU check, ready for a GPU machine when one is available (for about 15 minutes): one script,
# under 8 minutes on one H100, that writes one results file. benchmarks/README.md's GPU chapter records its figures.
#
#   bash benchmarks/gpu_check.sh            # on the GPU machine: $OUT/gpu_check/results.md (./gpu_check without $OUT)
#   bash benchmarks/gpu_check.sh --smoke    # on a CPU: every step at its smallest, to check the wiring (the tests)
#
# Steps, each under its own time limit, each one's output kept whole in its own file beside results.md:
#   1. the GPU and the software (nvidia-smi, torch, transformers);
#   2. the CUDA tests (tests/test_cuda.py: outputs and gradients equal to the CPU's, exact resume, bf16 and fp16);
#   3. bench_train: mini, small and base, fp32 and bf16 (the trainer's auto), eager and torch.compile, MFU printed;
#   4. bench_finetune: base's sequence classifier, padded and unpadded (the sequences packed into fewer rows),
#      against transformers, on shuffled batches (the plain loop's padding) and on finetune's length buckets.
# A step that fails or runs out of time is recorded as such and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
RESULTS=${OUT:-.}/gpu_check
SMOKE=0
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; elif [ -n "${1:-}" ]; then echo "usage: $0 [--smoke]" >&2; exit 2; fi
mkdir -p "$RESULTS"
: > "$RESULTS/steps.txt"

step() {  # step NAME LIMIT_SECONDS COMMAND...: run it, its output to NAME.txt, its exit code and seconds to steps.txt
  local name=$1 limit=$2
  shift 2
  local began=$SECONDS
  timeout "$limit" "$@" > "$RESULTS/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc seconds=$((SECONDS - began))" | tee -a "$RESULTS/steps.txt"
}

if [ $SMOKE = 1 ]; then
  DEVICE=cpu; TRAIN=(--presets tiny --warmup 1 --steps 1 --batch-size 4); TUNE=(--preset tiny --warmup 1 --steps 1)
else
  DEVICE=cuda; TRAIN=(--presets mini,small,base --batch-size 128 --compile); TUNE=(--preset base --batch-size 64)
fi
step machine 60 sh -c "(nvidia-smi || echo 'no nvidia-smi: no GPU here') && $PYTHON -c \
'import torch, transformers; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"transformers\", transformers.__version__)'"
step cuda_tests 150 "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_cuda.py
step bench_train 240 "$PYTHON" benchmarks/bench_train.py --device "$DEVICE" "${TRAIN[@]}" --json "$RESULTS/bench_train.json"
step bench_finetune_shuffled 90 "$PYTHON" benchmarks/bench_finetune.py --device "$DEVICE" "${TUNE[@]}" \
  --batches shuffled --json "$RESULTS/bench_finetune_shuffled.json"
step bench_finetune_bucketed 90 "$PYTHON" benchmarks/bench_finetune.py --device "$DEVICE" "${TUNE[@]}" \
  --batches bucketed --json "$RESULTS/bench_finetune_bucketed.json"

{
  echo "# GPU check, $(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit')"
  echo
  echo '```'
  cat "$RESULTS/steps.txt"
  echo '```'
  for name in machine cuda_tests bench_train bench_finetune_shuffled bench_finetune_bucketed; do
    echo
    echo "## $name"
    echo
    echo '```'
    tail -n 60 "$RESULTS/$name.txt"
    echo '```'
  done
} > "$RESULTS/results.md"
echo "results: $RESULTS/results.md"
