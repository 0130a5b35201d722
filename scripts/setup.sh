#!/usr/bin/env bash
# Create .venv (if needed) with torch and paraoracle installed; safe to run again.
# Without an NVIDIA GPU this installs the CPU build torch==2.13.0; with one, the CUDA build plus cupy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  python -c "import torch" 2>/dev/null || python -m pip install -q torch
  python -m pip install -q -e '.[test,gpu]'
else
  python -c "import torch" 2>/dev/null || python -m pip install -q torch==2.13.0
  python -m pip install -q -e '.[test]'
fi
python -c "import torch, profiler, predictor; print('paraoracle ready: torch', torch.__version__)"
