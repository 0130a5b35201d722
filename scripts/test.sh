#!/usr/bin/env bash
# The test command: set up (.venv, torch, paraoracle) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec python -m pytest -q --durations=15 "$@"
