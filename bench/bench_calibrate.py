"""Time a quick CPU calibration and print its headline figures, then check the harness adds no overhead:
best plain `torch.matmul` throughput, measured here with a bare perf_counter loop, for the quick GEMM
shapes, against the profile's GEMM figure for the same shapes (the issue requires the best quick GEMM
figure within 10% of it).

    python bench/bench_calibrate.py [--keep PATH] [--matmul-s 1.0]

Prints figures only; asserts nothing (speed is a property of the machine, see README "calibration").
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from profiler.bench_compute import GEMM_SHAPES_QUICK
from profiler.cmd_show import best_compute, stream_figures
from profiler.profile import load_profile


def best_matmul_flops_per_s(M: int, N: int, K: int, budget_s: float) -> float:
    """Best throughput of plain torch.matmul(a, b) over repeated batches of calls lasting >= 20 ms each."""
    a, b = torch.randn(M, K), torch.randn(K, N)
    for _ in range(3):
        torch.matmul(a, b)
    calls, elapsed = 1, 0.0
    while elapsed < 0.02:
        start = time.perf_counter()
        for _ in range(calls):
            torch.matmul(a, b)
        elapsed = time.perf_counter() - start
        calls *= 2
    best, deadline = float("inf"), time.perf_counter() + budget_s
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(calls):
            torch.matmul(a, b)
        best = min(best, (time.perf_counter() - start) / calls)
    return 2 * M * N * K / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", help="write the quick profile here instead of a temporary file")
    parser.add_argument("--matmul-s", type=float, default=1.0, help="seconds of torch.matmul timing per shape")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep) if args.keep else Path(tmp) / "quick.yaml"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--quick", "--force",
                        "--out", str(out)], check=True)
        wall_s = time.perf_counter() - start
        profile = load_profile(out)

    print(f"\nmachine: {profile.machine.cpu_model}, {profile.machine.cpu_cores} cores, torch threads "
          f"{torch.get_num_threads()}; torch {torch.__version__}")
    print(f"quick CPU calibration: {wall_s:.1f} s wall (benchmarks {profile.settings.get('duration_s', 0):.1f} s, "
          f"the rest is start-up, metadata, fitting and writing); {len(profile.samples)} samples")
    for bench, variant, dtype, rate, params in best_compute(profile):
        print(f"  best {bench} {variant} {dtype}: {rate / 1e9:.1f} GFLOP/s at {params}")
    for side, kernel, cache, dram in stream_figures(profile):
        if kernel in ("copy", "triad"):
            print(f"  STREAM {side} {kernel}: cache {cache / 1e9 if cache else float('nan'):.1f} GB/s, "
                  f"DRAM {dram / 1e9 if dram else float('nan'):.1f} GB/s")

    print("\nGEMM: profile (flops / median time, and / min time) vs best plain torch.matmul, same shape:")
    gemm = {(s.params["M"], s.params["N"], s.params["K"]): s for s in profile.samples if s.benchmark == "gemm"}
    best_shape = max(gemm, key=lambda k: gemm[k].flops / statistics.median(gemm[k].times_s))
    for shape in GEMM_SHAPES_QUICK:
        sample = gemm[shape]
        median_rate = sample.flops / statistics.median(sample.times_s)
        min_rate = sample.flops / min(sample.times_s)
        plain = best_matmul_flops_per_s(*shape, args.matmul_s)
        mark = "  <- best quick GEMM figure" if shape == best_shape else ""
        print(f"  M,N,K={shape}: profile {median_rate / 1e9:7.1f} (min-time {min_rate / 1e9:7.1f}) GFLOP/s, "
              f"torch.matmul best {plain / 1e9:7.1f} GFLOP/s, ratio {median_rate / plain:.3f}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
