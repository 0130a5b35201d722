#!/usr/bin/env bash
# The main job on embedded defaults: set up, calibrate this machine quickly (compute, memory and 2-rank
# collectives, plus ResNet-50's own data-parallel layers), show the profile, predict ResNet-50 training on 2
# of this machine's "devices" with it, and end with how it scales over 1-4 of them (a short table and a plot).
# Writes out/this-machine-<hostname>-<UTC time>.yaml (out/ is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate

mkdir -p out
PROFILE="out/this-machine-$(hostname | tr -c 'A-Za-z0-9._\n-' '_')-$(date -u +%Y%m%dT%H%M%SZ).yaml"
DEVICE=cpu  # the quick grid is the CPU grid; use `profiler calibrate --device cuda` for a GPU profile

# --model: ResNet-50's own per-device calls are measured next to the grid (docs/calibration.md, "In one step").
# Only the data-parallel strategy's 53 shapes: on the 2-core VM they add about 3 min to the 3 min quick run, where
# all strategies' 484 shapes (drop --strategy) add about 20 min; the other strategies are costed by the fits.
profiler calibrate --device "$DEVICE" --quick --ranks 2 --model resnet50 --batch 64 --gpus 2 --strategy data \
  --out "$PROFILE"
profiler show "$PROFILE"

predictor run --profile "$PROFILE" --model resnet50 --batch 64 --gpus 2 --gpus-per-node 2 --strategy all --dataset-size 1281167

# The scaling answer: ResNet-50 at 32 samples per rank on 1, 2 and 4 ranks of this machine (4 ranks share its cores:
# where adding ranks stops paying), the search's best plan and data parallelism; the plot beside the profile.
predictor scale --profile "$PROFILE" --model resnet50 --batch-per-gpu 32 --gpus 1-4 --gpus-per-node 4 \
  --dataset-size 1281167 --plot "${PROFILE%.yaml}-scale.png"
