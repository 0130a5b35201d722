#!/usr/bin/env bash
# Headless Chromium for the slow test that opens `predictor report`'s page (tests/predictor/test_report_html.py).
# Installs Debian's chromium and chromium-driver when they are missing and apt-get can run (as root, or with
# password-less sudo); otherwise says why, and that test skips. Never fails the caller: the browser is only for
# that check. Safe to run again.
set -uo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "note: no apt-get here; the headless-browser check of predictor report will skip"; exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "note: not root; install chromium chromium-driver for the headless-browser check of predictor report"; exit 0
  fi
fi
LOG=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
if timeout 600 $SUDO apt-get install -y -q chromium chromium-driver >"$LOG" 2>&1 \
   || { timeout 300 $SUDO apt-get update -q >>"$LOG" 2>&1 \
        && timeout 600 $SUDO apt-get install -y -q chromium chromium-driver >>"$LOG" 2>&1; }; then
  echo "chromium installed for the headless-browser check of predictor report"
else
  echo "note: could not install chromium (offline?); the headless-browser check will skip. Last lines:"
  tail -n 3 "$LOG"
fi
rm -f "$LOG"
exit 0
