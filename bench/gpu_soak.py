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

import argparse
import json
import re
import statistics
import time

from bench import describe
from bench.record import Figure, add_results_flag, record
from predictor.runner.suite import RUN_DTYPES
from profiler.cliutil import float_in, int_in
from profiler.errors import UserError
from profiler.outputs import write_atomic

NAME = "gpu-soak"


def device_name(text: str) -> str:
    """argparse type: cpu, cuda or cuda:N."""
    if text != "cpu" and not re.fullmatch(r"cuda(:\d{1,3})?", text):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text[:40]!r}")
    return text


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--device", type=device_name, default="cuda",
                        help="cpu, cuda or cuda:N (default cuda; cpu for a dry run)")
    parser.add_argument("--dtype", choices=RUN_DTYPES, default="bf16",
                        help="operand dtype, as a validation run's (tf32: float32 operands, TF32 math; default bf16)")
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

    from predictor.runner.build import torch_dtype

    gpu = args.device.startswith("cuda")
    if gpu and not torch.cuda.is_available():
        raise UserError(f"--device {args.device}: no CUDA GPU here (use --device cpu for a dry run)")
    if gpu and torch.cuda.device_count() <= int(args.device.partition(":")[2] or 0):
        raise UserError(f"--device {args.device}: this machine has {torch.cuda.device_count()} GPU(s)")
    dtype = torch_dtype(args.dtype)
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    n = args.size
    try:
        a, b = (torch.randn(n, n, device=args.device).to(dtype) for _ in range(2))
        out = torch.empty(n, n, device=args.device, dtype=dtype)
    except (RuntimeError, MemoryError) as err:  # torch.OutOfMemoryError is a RuntimeError
        raise UserError(f"--size {n}: three {n} x {n} {args.dtype} matrices do not fit on {args.device} "
                        f"({str(err).splitlines()[0][:80]})") from None
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    sample = telemetry if gpu else (lambda: {})
    result = soak(lambda: torch.matmul(a, b, out=out), sync, 2.0 * n ** 3, args.seconds, args.window_s, args.idle_s,
                  args.burst_calls, sample)
    name = torch.cuda.get_device_name(args.device) if gpu else "cpu"
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
