"""End-to-end drift check on this machine: three quick CPU calibrations and two `profiler drift` runs.

  A  quiet machine            profiler calibrate --device cpu --quick --only compute,memory
  B  machine loaded           the same, while one busy process per CPU spins in the background
  C  quiet machine again      the same as A

Expected: `profiler drift A B` exits 1 and names compute (and memory) families; `profiler drift A C`
exits 0. Prints both reports and a one-line verdict per comparison; exit 0 when both came out as expected.

    python -m bench drift-e2e [--keep DIR] [--busy N]
"""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import describe
from profiler.cliutil import int_in

CALIBRATE = ["-m", "profiler", "calibrate", "--device", "cpu", "--quick", "--only", "compute,memory"]


def _spin() -> None:
    while True:
        pass


def calibrate(out: Path, busy: int) -> float:
    spinners = [mp.Process(target=_spin, daemon=True) for _ in range(busy)]
    for p in spinners:
        p.start()
    started = time.perf_counter()
    try:
        subprocess.run([sys.executable, *CALIBRATE, "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    finally:
        for p in spinners:
            p.terminate()
            p.join()
    return time.perf_counter() - started


def drift(old: Path, new: Path) -> tuple[int, str]:
    result = subprocess.run([sys.executable, "-m", "profiler", "drift", str(old), str(new), "--no-predict"],
                            capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--keep", type=Path, help="write the three profiles into this folder (default: a temp folder)")
    parser.add_argument("--busy", type=int_in(1, 4 * (os.cpu_count() or 1)), default=os.cpu_count() or 2,
                        help="busy processes during run B (default: one per CPU)")


def run(args) -> int:
    folder = args.keep or Path(tempfile.mkdtemp(prefix="drift_e2e_"))
    folder.mkdir(parents=True, exist_ok=True)
    runs = {"A": 0, "B": args.busy, "C": 0}
    paths = {}
    for name, busy in runs.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].unlink(missing_ok=True)
        load_before = os.getloadavg()[0]
        took = calibrate(paths[name], busy)
        print(f"calibration {name} ({busy} busy processes): {took:.0f} s -> {paths[name]} "
              f"(1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)", flush=True)

    ok = True
    for new, expect in (("B", 1), ("C", 0)):
        code, report = drift(paths["A"], paths[new])
        print(f"\n===== profiler drift A {new} (expected exit {expect}) =====\n{report}")
        ok &= code == expect
        print(f"verdict A->{new}: exit {code}, {'as expected' if code == expect else 'NOT as expected'}")
    print(f"\nmachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; profiles in {folder}")
    return 0 if ok else 1
