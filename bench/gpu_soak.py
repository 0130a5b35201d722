"""Burst against sustained matrix-product speed: one large GEMM after an idle pause, then the same GEMM back to back.

The published H100 profile prices matrix products at a burst MAMF (boost clocks, idle siblings), and every H100 source
in the published corpora is predicted 7-12% fast (docs/validation.md). This measures what a GPU keeps up under
load: after `--idle-s` idle, the first `--burst-calls` GEMMs (the burst), then `--seconds` of the same GEMM in
windows of `--window-s`, each window's TFLOP/s beside the SM clock, power and temperature NVML reports (where pynvml
is installed; otherwise recorded as absent). Figures: burst and sustained TFLOP/s (the median of the last third of
the windows) and their ratio. Runs on a CPU too (tests: a small product, no telemetry); scripts/gpu_check.sh runs it
on the GPU before the calibration.

    python -m bench gpu-soak [--device cuda] [--dtype bf16] [--size 8192] [--seconds 20] [--results DIR]
"""
from __future__ import annotations

import json
import statistics
import time

from bench import describe
from bench.record import Figure, add_results_flag, record
from profiler.cliutil import float_in, int_in
from profiler.errors import UserError
from profiler.outputs import write_atomic

NAME = "gpu-soak"
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32"}


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--device", default="cuda", help="torch device (default cuda; cpu for a dry run)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="operand dtype (default bf16)")
    parser.add_argument("--size", type=int_in(16, 32768), default=8192, help="M = N = K of the GEMM (default 8192)")
    parser.add_argument("--seconds", type=float_in(0.05, 600.0), default=20.0, help="length of the soak (default 20)")
    parser.add_argument("--window-s", type=float_in(0.01, 60.0), default=0.5, help="window of one rate (default 0.5)")
    parser.add_argument("--idle-s", type=float_in(0.0, 60.0, low_open=False), default=2.0,
                        help="idle pause before the burst (default 2)")
    parser.add_argument("--burst-calls", type=int_in(1, 1000), default=5, help="GEMMs timed as the burst (default 5)")
    add_results_flag(parser)


def telemetry() -> dict:
    """SM clock (MHz), power limit (W), temperature (C) and slowdown reasons of the first GPU, via NVML; {} without."""
    from profiler.metadata import nvml_gpus

    gpus, _ = nvml_gpus()
    if not gpus:
        return {}
    g = gpus[0]
    return {"sm_clock_mhz": g.sm_clock_mhz, "temperature_c": g.temperature_c, "throttle_reasons": g.throttle_reasons}


def soak(matmul, sync, flops: float, seconds: float, window_s: float, idle_s: float, burst_calls: int,
         sample=telemetry, clock=time.perf_counter, pause=time.sleep) -> dict:
    """The module docstring's procedure with `matmul()` one GEMM of `flops`, `sync()` waiting for the device; pure
    apart from those (tests pass stand-ins)."""
    matmul()
    sync()  # build, first-call set-up
    pause(idle_s)
    start = clock()
    for _ in range(burst_calls):
        matmul()
    sync()
    burst = burst_calls * flops / max(clock() - start, 1e-12)
    windows, began = [], clock()
    while clock() - began < seconds:
        calls, w0 = 0, clock()
        while True:
            matmul()
            calls += 1
            if calls % 4 == 0:  # check the time every few calls: one sync per check
                sync()
                if clock() - w0 >= window_s:
                    break
        elapsed = clock() - w0
        windows.append({"t_s": round(clock() - began, 3), "tflops": calls * flops / elapsed / 1e12, **sample()})
    tail = windows[-max(1, len(windows) // 3):]
    sustained = statistics.median(w["tflops"] for w in tail) * 1e12
    return {"burst_flops_per_s": burst, "sustained_flops_per_s": sustained, "sustained_over_burst": sustained / burst,
            "first_window_flops_per_s": windows[0]["tflops"] * 1e12, "windows": windows}


def run(args) -> int:
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU here (use --device cpu for a dry run)")
    dtype = getattr(torch, DTYPES[args.dtype])
    if args.dtype == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    n = args.size
    a = torch.randn(n, n, device=args.device).to(dtype)
    b = torch.randn(n, n, device=args.device).to(dtype)
    out = torch.empty(n, n, device=args.device, dtype=dtype)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    sample = telemetry if args.device.startswith("cuda") else (lambda: {})
    result = soak(lambda: torch.matmul(a, b, out=out), sync, 2.0 * n ** 3, args.seconds, args.window_s, args.idle_s,
                  args.burst_calls, sample)
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"{name} {args.dtype} {n}^3: burst {result['burst_flops_per_s'] / 1e12:.1f} TFLOP/s, sustained "
          f"{result['sustained_flops_per_s'] / 1e12:.1f} ({result['sustained_over_burst']:.3f} of the burst) over "
          f"{len(result['windows'])} windows of {args.window_s} s")
    figures = [Figure(f"{args.dtype} {n}^3 GEMM, burst after {args.idle_s} s idle", result["burst_flops_per_s"] / 1e12,
                      "TFLOP/s"),
               Figure(f"{args.dtype} {n}^3 GEMM, sustained (last third of {args.seconds} s)",
                      result["sustained_flops_per_s"] / 1e12, "TFLOP/s"),
               Figure("sustained / burst", result["sustained_over_burst"], "ratio")]
    path = record(NAME, figures, args.results)
    windows = path.with_name(f"{NAME}.windows.jsonl")  # not *.json: `bench report` reads only the figures
    write_atomic(windows, "".join(json.dumps({"device": name, "dtype": args.dtype, "size": n, **w}) + "\n"
                                  for w in result["windows"]))
    print(f"windows: {windows}")
    return 0
