"""Latency of `predictor scale`: a 1-1024 device sweep of ResNet-50 with its plot, wall seconds warm (target <= 2 s).

Times the whole command as a user runs it (start-up, profile reading, both lines of the sweep at 11 device counts
with intervals, and the PNG), warm: the graph cache (PARAORACLE_CACHE) filled by one untimed run. The figure is the
median of --repeats runs (results/scale.json), with the sweep alone in this process beside it.

    predictor scale --model resnet50 --batch-per-gpu 64 --gpus 1-1024 --plot FILE
    python -m bench scale [--repeats 5] [--profile NAME] [--gpus 1-1024] [--batch-per-gpu 64]
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench import describe
from bench.record import Figure, add_results_flag, record
from bench.run_latency import predictor_command, timed_run
from profiler.cliutil import batch_size, int_in

NAME = "scale"
TARGET_WARM_S = "<= 2"


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--repeats", type=int_in(1, 100), default=5, help="timed runs (default 5)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-per-gpu", type=batch_size, default=64)
    parser.add_argument("--gpus", default="1-1024", help="device counts, as predictor scale takes them")
    parser.add_argument("--profile", help="profile (default: the shipped reference profile)")
    parser.add_argument("--timeout", type=int_in(1, 3600), default=300, help="seconds one run may take")
    add_results_flag(parser)


def _sweep_seconds(args, repeats: int) -> list[float]:
    """The sweep alone (predictor.scaling.sweep, both lines), in this process, after one untimed call."""
    from predictor.api import load_cost_model, load_model
    from predictor.scaling import BEST, parse_gpus, sweep

    graph, (cm, _) = load_model(args.model), load_cost_model(args.profile)
    counts = parse_gpus(args.gpus, 1 << 20)
    out = []
    for k in range(repeats + 1):
        start = time.perf_counter()
        sweep(graph, cm, counts, strategies=(BEST, "data"), batch_per_device=args.batch_per_gpu)
        if k:
            out.append(time.perf_counter() - start)
    return out


def run(args) -> int:
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as folder:
        plot = Path(folder) / "scale.png"
        command = predictor_command() + ["scale", "--model", args.model, "--batch-per-gpu", str(args.batch_per_gpu),
                                         "--gpus", args.gpus, "--plot", str(plot), "--force"]
        if args.profile:
            command += ["--profile", args.profile]
        print(f"command: {' '.join(command)}; {args.repeats} timed runs")
        cache = Path(folder) / "cache"
        timed_run(command, cache, args.timeout)  # fills the graph cache, untimed
        warm = [timed_run(command, cache, args.timeout) for _ in range(args.repeats)]
    sweep_s = _sweep_seconds(args, args.repeats)
    print("  warm: " + ", ".join(f"{v:.2f}" for v in warm) + f" s; median {statistics.median(warm):.2f} s")
    print("  sweep alone: " + ", ".join(f"{v:.3f}" for v in sweep_s) + f" s; median {statistics.median(sweep_s):.3f} s")
    record(NAME, [Figure("warm wall time, 1-1024 sweep with plot (median)", statistics.median(warm), "s",
                         TARGET_WARM_S),
                  Figure("the sweep alone, in process (median)", statistics.median(sweep_s), "s")], args.results)
    return 0
