#!/usr/bin/env bash
# The main job on embedded defaults: set up, calibrate this machine quickly, show the profile.
# Writes out/this-machine-<hostname>-<UTC time>.yaml (out/ is git-ignored) and prints its summary.
# Other stages append their step at the end (e.g. `predictor run --profile "$PROFILE" ...`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate

mkdir -p out
PROFILE="out/this-machine-$(hostname | tr -c 'A-Za-z0-9._\n-' '_')-$(date -u +%Y%m%dT%H%M%SZ).yaml"
DEVICE=cpu  # the quick grid is the CPU grid; use `profiler calibrate --device cuda` for a GPU profile

profiler calibrate --device "$DEVICE" --quick --out "$PROFILE"
profiler show "$PROFILE"

# --- later stages: append below, using "$PROFILE" -------------------------------------------------
predictor run --profile "$PROFILE" --model resnet50 --batch 64 --gpus 2 --gpus-per-node 2 --strategy all --dataset-size 1281167
