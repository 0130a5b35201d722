#!/usr/bin/env bash
# Create .venv (if needed) with torch and paraoracle installed; safe to run again.
# Without an NVIDIA GPU this installs the CPU build torch==2.13.0; with one, the CUDA build plus cupy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
HAS_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then HAS_GPU=1; fi
if [ ! -x .venv/bin/python ]; then
  # On a GPU machine, see a preinstalled CUDA torch/cupy (GPU hosts are often offline) instead of fetching GBs.
  if [ "$HAS_GPU" = 1 ]; then
    "$PY" -m venv --system-site-packages .venv
    # the preinstalled torch may live in a venv of its own, whose packages --system-site-packages does not see
    "$PY" -c "import site; print('\n'.join(site.getsitepackages()))" \
      > "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/host-site-packages.pth"
  else
    "$PY" -m venv .venv
  fi
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if [ "$HAS_GPU" = 1 ]; then
  python -c "import torch" 2>/dev/null || python -m pip install -q torch
  python -m pip install -q -e '.[test]' || python -m pip install -q --no-build-isolation --no-deps -e .
  python -c "import cupy" 2>/dev/null || python -m pip install -q cupy-cuda12x \
    || echo "warning: cupy not installed; GPU STREAM will run as torch ops (recorded in the profile)"
else
  python -c "import torch" 2>/dev/null || python -m pip install -q torch==2.13.0
  python -m pip install -q -e '.[test]'
fi
python -c "import torch, profiler, predictor; print('paraoracle ready: torch', torch.__version__)"
