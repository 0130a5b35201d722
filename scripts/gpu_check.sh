#!/usr/bin/env bash
# GPU check (issue 40), for a machine with an NVIDIA GPU, in two stages that each fit one 10-minute device call:
#   bash scripts/gpu_check.sh OUTDIR calibrate            setup, GPU tests, the FULL GPU calibration, show, collectives
#   bash scripts/gpu_check.sh OUTDIR validate PROFILE     setup, the full-size networks measured against PROFILE
#   bash scripts/gpu_check.sh OUTDIR all                  both, one after the other (no device-time limit)
# Steps (each bounded by `timeout`, each logged to OUTDIR/<step>.log; a failed step does not stop later ones):
#   setup       scripts/setup.sh (CUDA torch + cupy); fast when .venv is already there
#   gpu-tests   pytest -m gpu (CUDA timer, cupy STREAM kernels, GPU compute cases, ...)
#   soak        python -m bench gpu-soak: a bf16 8192^3 GEMM's burst and sustained TFLOP/s with NVML clocks
#               -> OUTDIR/gpu-soak.json and .windows.jsonl
#   calibrate   the full GPU grid (1775 points on an H100, about 177 s estimated) -> OUTDIR/<gpu>.yaml and
#               out/gpu/<gpu>.yaml (kept for the validate stage); Ctrl-C'd at its limit: the .partial is fitted
#   show        profiler show on it
#   collectives NCCL collectives over every local GPU (skipped with a message on one GPU)
#   cooperative cooperative-process vs GPipe measured runs (>= 2 GPUs)
#   validate    predictor validate --suite gpu_full (ResNet-50, VGG16, BERT-base, GPT-2 small in fp32, tf32 and
#               bf16 autocast, cuDNN's search on and off; CosmoFlow, DeepCAM and a Qwen3-shaped MoE in bf16; 50 timed steps each, one more profiled: device time by
#               kind of kernel against the prediction's) -> OUTDIR/gpu_full.jsonl and .png;
#               with >= 2 GPUs also gpu_full_ddp (data-parallel over NCCL) -> OUTDIR/gpu_full_ddp.jsonl
# Exit status: 0 when every step passed, 1 otherwise (the failed steps are listed at the end), 2 on bad arguments.
# Ship a profile: `cp OUTDIR/<gpu>.yaml calibrate/profiles/` (calibrate.shipped; docs/gpu.md "The GPU check"), then
# `python -m calibrate.measured_kernels` (the kernel models the published profiles borrow for 3-D convolutions).
set -uo pipefail
OUT=${1:?usage: bash scripts/gpu_check.sh OUTDIR [calibrate|validate PROFILE|all]}
STAGE=${2:-all}
case "$STAGE" in
  calibrate|all) ;;
  validate) [ -n "${3:-}" ] || { echo "gpu_check.sh: the validate stage needs a PROFILE (a calibrated .yaml)"; exit 2; } ;;
  *) echo "gpu_check.sh: stage must be calibrate, validate or all, got '$STAGE'"; exit 2 ;;
esac
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
FAILED=()

step() {  # step NAME LIMIT_S COMMAND...: run with a time limit (SIGINT first, so calibrate keeps a .partial)
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  echo "== $name (limit ${limit} s): $*"
  timeout -s INT -k 15 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  echo "   exit $rc after $(( $(date +%s) - start )) s; log $OUT/$name.log"
  [ "$rc" -eq 0 ] || FAILED+=("$name")
  return 0
}

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed: is this a GPU machine?"
step setup 120 bash scripts/setup.sh
if [ -x .venv/bin/python ]; then . .venv/bin/activate; fi
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())" | tee "$OUT/torch.txt"
NGPUS=$(python -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
GPU=$(python -c "import torch; print(torch.cuda.get_device_name(0).split()[-1].lower() if torch.cuda.is_available() else 'nogpu')" 2>/dev/null || echo nogpu)
GPU=$(echo "$GPU" | tr -c 'a-z0-9\n-' '-')
PROFILE=${3:-}

if [ "$STAGE" != validate ]; then
  step gpu-tests 60 python -m pytest -q -m gpu -p no:cacheprovider
  # the datasheet entry beside the figures derived from NVML (a GPU the datasheet file lacks takes the latter)
  step gpu-specs 20 python -m calibrate.gpu_specs
  # burst vs sustained bf16 GEMM (the published H100 profile's burst MAMF; docs/validation.md), and the GPU warm
  # for the grid, as a training step finds it
  step soak 35 python -m bench gpu-soak --seconds 20 --results "$OUT"
  RANKS=()
  if [ "${NGPUS:-0}" -gt 1 ]; then RANKS=(--ranks "$NGPUS"); fi  # NCCL collectives over every local GPU
  mkdir -p out/gpu
  PROFILE="out/gpu/$GPU.yaml"
  step calibrate 260 profiler calibrate --device cuda --force "${RANKS[@]}" --out "$PROFILE"
  if [ ! -f "$PROFILE" ] && [ -f "$PROFILE.partial" ]; then
    step fit-partial 60 profiler fit "$PROFILE.partial" --out "$PROFILE"
  fi
  [ -f "$PROFILE" ] && cp "$PROFILE" "$OUT/"
  step show 30 profiler show "$PROFILE"
  # 1 GPU: collectives print "collectives skipped: 1 rank"; several: NCCL over every local GPU
  step collectives 60 profiler calibrate --device cuda --quick --only collectives --ranks "${NGPUS:-1}" \
    --max-message-bytes 16777216 --force --out "$OUT/collectives.yaml"
  if [ "${NGPUS:-0}" -gt 1 ]; then  # cooperative-process vs GPipe, measured next to the predictions
    step cooperative 60 python -m bench measure-cooperative --profile "$PROFILE" --ranks "$NGPUS" --batch 64
  fi
fi

if [ "$STAGE" != calibrate ]; then
  # the full-size networks, measured against the profile: 36 runs, about 5 minutes on an H100 (estimated)
  step validate 420 predictor validate --profile "$PROFILE" --suite gpu_full --out "$OUT/gpu_full.jsonl" \
    --plot "$OUT/gpu_full.png"
  if [ "${NGPUS:-0}" -gt 1 ]; then
    step validate-ddp 240 predictor validate --profile "$PROFILE" --suite gpu_full_ddp --out "$OUT/gpu_full_ddp.jsonl"
  fi
fi

if [ "${#FAILED[@]}" -gt 0 ]; then
  echo "FAILED steps: ${FAILED[*]} (logs in $OUT)"
  exit 1
fi
echo "all GPU checks passed (logs in $OUT)"
