"""Quick CPU calibration with 2-rank collectives: wall time (target <= 60 s) and fit quality (every collective fit
<= 10% held-out median error, every compute fit <= 15%), over several calibrations; and the harness's GEMM figure
against plain torch.matmul. Each run is the whole user command, `profiler calibrate --device cpu --quick --ranks 2`, timed from start to exit;
the bar: the median wall time within 60 s and the fit targets met in at least 4 of 5 calibrations. Then the
harness must add no overhead: the last profile's GEMM figure against the best plain `torch.matmul` throughput of
the quick GEMM shapes, timed with a bare perf_counter loop (ratio >= 0.9). Records results/calibrate.json; prints
figures only (speed is a property of the machine).
    python -m bench calibrate [--runs 5] [--keep PATH] [--matmul-s 1.0]
    python -m bench calibrate --profile QUICK.yaml    # figures of an existing quick profile (no wall time)
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
from profiler.cliutil import float_in, int_in
from paraoracle.cmd_show import best_compute, stream_figures
from profiler.errors import UserError
from profiler.profile import load_profile

NAME = "calibrate"
TARGET_WALL_S = "<= 60"
TARGET_GEMM_RATIO = ">= 0.9"
#: the issue's fit-quality bar: held-out median relative error of every fit of each kind
MAX_COLLECTIVE_ERROR = 0.10
MAX_COMPUTE_ERROR = 0.15
COMMAND = ["calibrate", "--device", "cpu", "--quick", "--ranks", "2", "--force"]


def fit_errors(profile) -> tuple[dict[str, float], dict[str, float]]:
    """Held-out median relative error per compute family and per collective fit (families too small to
    cross-validate have none)."""
    coefficients = profile.coefficients or {}
    compute = {name: fit["quality"]["median_rel_error"] for name, fit in (coefficients.get("compute") or {}).items()
               if fit.get("quality")}
    collectives = {f"{fit['op']} p={fit['group_size']}": fit["quality"]["median_rel_error"]
                   for fit in coefficients.get("collectives") or [] if fit.get("quality")}
    return compute, collectives


def quality_line(profile) -> tuple[bool, str]:
    """(targets met, one line naming the worst fit of each kind and every fit over its target)."""
    compute, collectives = fit_errors(profile)
    if not compute or not collectives:
        return False, "no compute or no collective fits"
    over = [f"{k} {v:.1%}" for k, v in sorted(compute.items()) if v > MAX_COMPUTE_ERROR]
    over += [f"{k} {v:.1%}" for k, v in sorted(collectives.items()) if v > MAX_COLLECTIVE_ERROR]
    line = (f"compute fits {len(compute)}, worst {max(compute.values()):.1%} (<= {MAX_COMPUTE_ERROR:.0%}); "
            f"collective fits {len(collectives)}, worst {max(collectives.values()):.1%} (<= {MAX_COLLECTIVE_ERROR:.0%})")
    return not over, line + (f"; over: {', '.join(over)}" if over else "")


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
    parser.add_argument("--runs", type=int_in(1, 20), default=5, help="calibrations to run (default 5)")
    parser.add_argument("--keep", help="write the last quick profile here instead of a temporary file")
    parser.add_argument("--profile", help="use this quick CPU profile instead of calibrating now (no wall-time figure)")
    parser.add_argument("--matmul-s", type=float_in(0.0, 3600.0), default=1.0,
                        help="seconds of torch.matmul timing per shape")
    add_results_flag(parser)


def run(args) -> int:
    if args.profile and args.keep:
        raise UserError("--keep and --profile exclude each other")
    walls, met_runs, profile = [], 0, None
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile:
            out = Path(args.profile)
            profile = load_profile(out)
            ok, line = quality_line(profile)
            met_runs += ok
            print(f"{out}: {line}")
        else:
            out = Path(args.keep) if args.keep else Path(tmp) / "quick.yaml"
            for i in range(args.runs):
                start = time.perf_counter()
                code = subprocess.run([sys.executable, "-m", "paraoracle.cli", *COMMAND, "--out", str(out)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                walls.append(time.perf_counter() - start)
                if code.returncode != 0:
                    raise UserError(f"profiler calibrate failed (exit {code.returncode}): "
                                    f"{(code.stderr.strip().splitlines() or [''])[-1]}")
                profile = load_profile(out)
                ok, line = quality_line(profile)
                met_runs += ok
                print(f"run {i + 1}/{args.runs}: {walls[-1]:.1f} s wall (benchmarks "
                      f"{profile.settings.get('duration_s') or 0:.1f} s); {line}", flush=True)
    bench_s = profile.settings.get("duration_s")
    print(f"\nmachine: {profile.machine.cpu_model}, {profile.machine.cpu_cores} cores, torch threads "
          f"{torch.get_num_threads()}; torch {torch.__version__}")
    print(f"last profile: {len(profile.samples)} samples, benchmarks {bench_s or 0:.1f} s")
    for bench, variant, dtype, rate, params in best_compute(profile):
        print(f"  best {bench} {variant} {dtype}: {rate / 1e9:.1f} GFLOP/s at {params}")
    for side, kernel, cache, dram in stream_figures(profile):
        if kernel in ("copy", "triad"):
            print(f"  STREAM {side} {kernel}: cache {cache / 1e9 if cache else float('nan'):.1f} GB/s, "
                  f"DRAM {dram / 1e9 if dram else float('nan'):.1f} GB/s")

    torch.set_num_threads(int(profile.settings.get("threads") or torch.get_num_threads()))  # as the profile ran
    print(f"\nGEMM: profile (flops / median time, and / min time) vs best plain torch.matmul, same shape, "
          f"{torch.get_num_threads()} thread(s):")
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
    wall_s = statistics.median(walls) if walls else None
    if walls:
        print(f"\nquick calibration with 2-rank collectives: median {wall_s:.1f} s wall over {len(walls)} runs "
              f"({', '.join(f'{w:.1f}' for w in walls)}); fit targets met in {met_runs} of {len(walls)}")
    record(NAME, [
        Figure("quick calibration wall time, 2-rank collectives (median of runs)", wall_s, "s", TARGET_WALL_S),
        Figure("calibrations timed", len(walls), "runs"),
        Figure("calibrations with every fit within its target", met_runs / len(walls) if walls else None, "share",
               ">= 0.8"),
        Figure("benchmark time inside the last calibration", bench_s, "s"),
        Figure("samples", len(profile.samples), "samples"),
        Figure("best quick GEMM figure", best_gflops, "GFLOP/s"),
        Figure("best quick GEMM / plain torch.matmul", best_ratio, "ratio", TARGET_GEMM_RATIO),
    ], args.results)
    return 0
