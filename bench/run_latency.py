"""Latency of `predictor run`: wall seconds warm (graph cache filled, target <= 1.5 s) and cold (<= 3 s).

Times the whole command as a user runs it, interpreter start-up included:

    predictor run --model resnet50 --batch 256 --gpus 8 --strategy data

warm: with a graph cache (PARAORACLE_CACHE) that one untimed run has filled; cold: each run with a new, empty
cache folder, so the model is traced again. Each is run --repeats times; the figures are the medians
(results/run-latency.json).

    python -m bench run-latency [--repeats 5] [--model resnet50 --batch 256 --gpus 8 --strategy data]
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import describe
from bench.record import REPO, Figure, add_results_flag, record
from profiler.cliutil import batch_size, device_count, int_in
from profiler.errors import UserError

NAME = "run-latency"
TARGETS = {"warm": "<= 1.5", "cold": "<= 3"}


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--repeats", type=int_in(1, 100), default=5, help="timed runs per case (default 5)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=batch_size, default=256)
    parser.add_argument("--gpus", type=device_count, default=8)
    parser.add_argument("--strategy", default="data")
    parser.add_argument("--profile", help="profile YAML (default: the shipped reference profile)")
    parser.add_argument("--timeout", type=int_in(1, 3600), default=300, help="seconds one run may take")
    add_results_flag(parser)


def predictor_command() -> list[str]:
    """The `predictor` entry point of this environment (what a user types), else `python -m predictor`."""
    script = Path(sys.executable).parent / "predictor"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "predictor"]


def timed_run(command: list[str], cache: Path, timeout: int) -> float:
    env = {**os.environ, "PARAORACLE_CACHE": str(cache)}
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError(f"`{' '.join(command)}` took over {timeout} s (--timeout)") from None
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"`{' '.join(command)}` failed (exit {done.returncode}): {last}")
    return wall_s


def cold_and_warm(command: list[str], repeats: int, timeout: int) -> dict[str, list[float]]:
    """Wall seconds of `command`, `repeats` times each with an empty graph cache (cold) and with one an untimed run
    filled (warm), alternated; printed as it goes."""
    print(f"command: {' '.join(command)}; {repeats} timed runs per case")
    times: dict[str, list[float]] = {"warm": [], "cold": []}
    with tempfile.TemporaryDirectory(prefix="latency_") as folder:
        warm_cache = Path(folder) / "warm"
        timed_run(command, warm_cache, timeout)  # fills the cache, untimed
        for k in range(repeats):
            times["cold"].append(timed_run(command, Path(folder) / f"cold-{k}", timeout))
            times["warm"].append(timed_run(command, warm_cache, timeout))
    for case, values in times.items():
        print(f"  {case}: " + ", ".join(f"{v:.2f}" for v in values) + f" s; median {statistics.median(values):.2f} s")
    return times


def run(args) -> int:
    command = predictor_command() + ["run", "--model", args.model, "--batch", str(args.batch), "--gpus",
                                     str(args.gpus), "--strategy", args.strategy]
    if args.profile:
        command += ["--profile", args.profile]
    times = cold_and_warm(command, args.repeats, args.timeout)
    record(NAME, [Figure(f"{case} wall time (median)", statistics.median(values), "s", TARGETS[case])
                  for case, values in times.items()], args.results)
    return 0
