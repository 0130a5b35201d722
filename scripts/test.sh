#!/usr/bin/env bash
# The test command: set up (.venv, torch, paraoracle) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh  # headless Chromium for the HTML report's check (skips it where it cannot install)
. .venv/bin/activate
exec python -m pytest -q --durations=15 "$@"
