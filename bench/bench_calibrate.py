"""Quick CPU calibration: wall time (target <= 60 s), and the harness's GEMM figure against plain torch.matmul.

Times `profiler calibrate --device cpu --quick` and prints its headline figures, then checks the harness adds no
overhead: best plain `torch.matmul` throughput, measured here with a bare perf_counter loop, for the quick GEMM
shapes, against the profile's GEMM figure for the same shapes (the issue requires the best quick GEMM figure
within 10% of it: ratio >= 0.9). Records results/calibrate.json.

    python -m bench calibrate [--keep PATH] [--matmul-s 1.0]
    python -m bench calibrate --profile QUICK.yaml    # figures of an existing quick profile (no wall time)

Prints figures only; asserts nothing (speed is a property of the machine, see README "calibration").
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench import describe
from bench.record import Figure, add_results_flag, record
from profiler.bench_compute import GEMM_SHAPES_QUICK
from profiler.cliutil import float_in
from paraoracle.cmd_show import best_compute, stream_figures
from profiler.errors import UserError
from profiler.profile import load_profile

NAME = "calibrate"
TARGET_WALL_S = "<= 60"
TARGET_GEMM_RATIO = ">= 0.9"


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
    while best == float("inf") or time.perf_counter() < deadline:  # at least one timed batch
        start = time.perf_counter()
        for _ in range(calls):
            torch.matmul(a, b)
        best = min(best, (time.perf_counter() - start) / calls)
    return 2 * M * N * K / best


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--keep", help="write the quick profile here instead of a temporary file")
    parser.add_argument("--profile", help="use this quick CPU profile instead of calibrating now (no wall-time figure)")
    parser.add_argument("--matmul-s", type=float_in(0.0, 3600.0), default=1.0,
                        help="seconds of torch.matmul timing per shape")
    add_results_flag(parser)


def run(args) -> int:
    if args.profile and args.keep:
        raise UserError("--keep and --profile exclude each other")
    wall_s = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile:
            out = Path(args.profile)
        else:
            out = Path(args.keep) if args.keep else Path(tmp) / "quick.yaml"
            start = time.perf_counter()
            code = subprocess.run([sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--quick",
                                   "--force", "--out", str(out)]).returncode
            if code != 0:
                raise UserError(f"profiler calibrate failed (exit {code})")
            wall_s = time.perf_counter() - start
        profile = load_profile(out)

    bench_s = profile.settings.get("duration_s")
    print(f"\nmachine: {profile.machine.cpu_model}, {profile.machine.cpu_cores} cores, torch threads "
          f"{torch.get_num_threads()}; torch {torch.__version__}")
    if wall_s is not None:
        print(f"quick CPU calibration: {wall_s:.1f} s wall (benchmarks {bench_s or 0:.1f} s, "
              f"the rest is start-up, metadata, fitting and writing); {len(profile.samples)} samples")
    else:
        print(f"profile {out}: {len(profile.samples)} samples, benchmarks {bench_s or 0:.1f} s")
    for bench, variant, dtype, rate, params in best_compute(profile):
        print(f"  best {bench} {variant} {dtype}: {rate / 1e9:.1f} GFLOP/s at {params}")
    for side, kernel, cache, dram in stream_figures(profile):
        if kernel in ("copy", "triad"):
            print(f"  STREAM {side} {kernel}: cache {cache / 1e9 if cache else float('nan'):.1f} GB/s, "
                  f"DRAM {dram / 1e9 if dram else float('nan'):.1f} GB/s")

    print("\nGEMM: profile (flops / median time, and / min time) vs best plain torch.matmul, same shape:")
    gemm = {(s.params["M"], s.params["N"], s.params["K"]): s for s in profile.samples if s.benchmark == "gemm"}
    if not gemm:
        raise UserError(f"{out}: no GEMM samples (a quick CPU calibration has them)")
    best_shape = max(gemm, key=lambda k: gemm[k].flops / statistics.median(gemm[k].times_s))
    best_gflops = gemm[best_shape].flops / statistics.median(gemm[best_shape].times_s) / 1e9
    best_ratio = None  # measured when the best shape is one of the quick shapes (it is in a quick profile)
    for shape in GEMM_SHAPES_QUICK:
        if shape not in gemm:
            continue
        sample = gemm[shape]
        median_rate = sample.flops / statistics.median(sample.times_s)
        min_rate = sample.flops / min(sample.times_s)
        plain = best_matmul_flops_per_s(*shape, args.matmul_s)
        mark = ""
        if shape == best_shape:
            mark, best_ratio = "  <- best quick GEMM figure", median_rate / plain
        print(f"  M,N,K={shape}: profile {median_rate / 1e9:7.1f} (min-time {min_rate / 1e9:7.1f}) GFLOP/s, "
              f"torch.matmul best {plain / 1e9:7.1f} GFLOP/s, ratio {median_rate / plain:.3f}{mark}")
    record(NAME, [
        Figure("quick calibration wall time", wall_s, "s", TARGET_WALL_S),
        Figure("benchmark time inside the calibration", bench_s, "s"),
        Figure("samples", len(profile.samples), "samples"),
        Figure("best quick GEMM figure", best_gflops, "GFLOP/s"),
        Figure("best quick GEMM / plain torch.matmul", best_ratio, "ratio", TARGET_GEMM_RATIO),
    ], args.results)
    return 0
