"""Collectives: quick 2-rank calibration time (target < 90 s), harness vs hand-written all_reduce (within 15%).

Figures (printed and recorded in results/collectives.json; nothing asserted): the wall time of `profiler calibrate
--device cpu --ranks 2 --quick --only collectives`, and the agreement of the profiler's allreduce medians with a
plain torch.distributed.all_reduce loop on the same group, in the latency and throughput regimes. Rounds are paired
per size (hand loop, profiler, hand loop, same iteration counts) so machine load affects both alike; the figure is
the median over rounds of the per-round ratio, and a round's two hand loops give the noise floor.

    python -m bench collectives [--skip-calibration] [--sizes 4,4096,65536,1048576,16777216] [--rounds 30]
                                [--budget quick|full]
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

from bench import describe
from bench.record import REPO as ROOT
from bench.record import Figure, add_results_flag, record
from profiler.cliutil import int_in
from profiler.errors import UserError

NAME = "collectives"
TARGET_CALIBRATION_S, TARGET_DISAGREEMENT_PCT = "< 90", "<= 15"


def time_quick_calibration() -> float | None:
    """Wall seconds of the quick collectives calibration through the CLI (None when it failed)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "collectives.yaml"
        command = [sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--ranks", "2", "--quick",
                   "--only", "collectives", "--out", str(out)]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"quick calibration FAILED (exit {done.returncode}): {last}")
            return None
        from profiler.profile import load_profile

        profile = load_profile(out)
        inside_s = profile.settings.get("duration_s")
        print(f"quick CPU collectives calibration, 2 gloo ranks: {wall_s:.1f} s wall (command start to exit; "
              f"{inside_s} s inside the command), {len(profile.samples)} samples; target < 90 s: "
              f"{'OK' if wall_s < 90 else 'MISSED'}")
        print(f"  ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
        return wall_s


def hand_loop(size_bytes: int, iterations: int, ops_per_sample: int, samples: int, group):
    """Independent reference: plain torch.distributed calls, perf_counter, max over ranks via all_gather_object.
    Returns (latency times, throughput per-op times)."""
    import torch

    buf = torch.zeros(size_bytes // 4, dtype=torch.float32)
    dist.all_reduce(buf, group=group)  # warm-up
    latency = []
    for _ in range(iterations):
        dist.barrier(group=group)
        start = time.perf_counter()
        dist.all_reduce(buf, group=group)
        latency.append(time.perf_counter() - start)
    throughput = []
    for _ in range(samples):
        dist.barrier(group=group)
        start = time.perf_counter()
        for _ in range(ops_per_sample):
            dist.all_reduce(buf, group=group)
        throughput.append((time.perf_counter() - start) / ops_per_sample)
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (latency, throughput), group=group)
    latency = [max(values) for values in zip(*(g[0] for g in gathered))]
    throughput = [max(values) for values in zip(*(g[1] for g in gathered))]
    return latency, throughput


def compare_rank(rank: int, world: int, port: int, sizes: list[int], rounds: int, budget_name: str, results) -> None:
    """Per size, `rounds` paired rounds: hand loop (A), the profiler's own allreduce point (kernel + harness,
    the --budget's iterations), hand loop again (B), all with the same iteration counts on the same group. Per round
    and regime: ratio = profiler median / mean of the A and B medians, noise = A median / B median."""
    import torch

    from kernels.collectives import allreduce
    from profiler.comm import harness
    from profiler.comm.harness import measure_point

    budget = getattr(harness, budget_name.upper())

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    world_group = dist.new_group(list(range(world)))
    rows = []
    for size in sizes:
        ratios, noises = ([], []), ([], [])
        for _ in range(rounds):
            call = allreduce.setup(size, world_group, list(range(world)), rank, "cpu", torch.float32)
            first = measure_point(call, world_group, "cpu", budget)  # fixes the iteration counts of this round
            counts = (len(first.latency_s), first.ops_per_sample, len(first.throughput_s))
            # the same counts for the profiler's timed point: its own warm-up estimate could pick another
            # number of ops per sample, and per-op throughput depends on it
            fixed = dataclasses.replace(budget, seconds=1e9, latency_min=counts[0], latency_max=counts[0],
                                        throughput_max_ops=counts[1])
            hand_a = hand_loop(size, *counts, world_group)
            mine = measure_point(call, world_group, "cpu", fixed)
            hand_b = hand_loop(size, *counts, world_group)
            for regime, profiler_times in enumerate((mine.latency_s, mine.throughput_s)):
                a, b = statistics.median(hand_a[regime]), statistics.median(hand_b[regime])
                ratios[regime].append(statistics.median(profiler_times) / ((a + b) / 2))
                noises[regime].append(a / b)
        rows.append((size, ratios, noises))
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def _spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"[{q[0] - 1:+.0%}, {q[2] - 1:+.0%}]"


def _median_ci(values: list[float], draws: int = 2000) -> str:
    """95% bootstrap interval of the median ratio over rounds: a disagreement whose interval holds 0 is noise."""
    import numpy as np

    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(values, (draws, len(values))), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return f"[{low - 1:+.0%}, {high - 1:+.0%}]"


def compare_allreduce(sizes: list[int], rounds: int, budget: str) -> float:
    """Prints the table; returns the largest median disagreement over sizes and regimes (a fraction)."""
    from profiler.comm.launch import check_local_port

    port = check_local_port("127.0.0.1", None)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=compare_rank, args=(r, 2, port, sizes, rounds, budget, results)) for r in range(2)]
    for p in procs:
        p.start()
    rows = results.get(timeout=1800)
    for p in procs:
        p.join()
    print(f"allreduce, 2 gloo ranks: profiler (kernel + harness, {budget} budget) vs a hand-written loop on the "
          f"same group, {rounds} paired rounds (hand, profiler, hand); per round profiler median / hand median")
    print(f"{'size (B)':>10} | {'latency: median ratio':>21} {'95% CI':>14} {'noise IQR':>14} | "
          f"{'throughput: median ratio':>24} {'95% CI':>14} {'noise IQR':>14}")
    worst = 0.0
    for size, ratios, noises in rows:
        cells = []
        for regime, width in ((0, 21), (1, 24)):
            diff = statistics.median(ratios[regime]) - 1
            worst = max(worst, abs(diff))
            cells.append(f"{diff:>+{width}.1%} {_median_ci(ratios[regime]):>14} {_spread(noises[regime]):>14}")
        print(f"{size:>10} | {cells[0]} | {cells[1]}")
    print(f"largest median disagreement {worst:.1%}; target within 15%: {'OK' if worst <= 0.15 else 'MISSED'} "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; noise = hand loop A / B in the same round)")
    return worst


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise UserError(f"--sizes: expected byte counts separated by commas, got {text[:60]!r}") from None
    if not sizes or any(not 4 <= s <= 1 << 34 for s in sizes):
        raise UserError("--sizes: each size must be in 4..2^34 bytes")
    return sizes


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--skip-calibration", action="store_true", help="only the allreduce comparison")
    parser.add_argument("--sizes", default="4,4096,65536,1048576,16777216", help="allreduce sizes in bytes")
    parser.add_argument("--rounds", type=int_in(1, 10000), default=30, help="paired rounds per size")
    parser.add_argument("--budget", choices=("quick", "full"), default="quick",
                        help="the harness's iteration budget per point: calibrate --quick's, or the default grid's")
    add_results_flag(parser)


def run(args) -> int:
    sizes = _sizes(args.sizes)
    wall_s = None if args.skip_calibration else time_quick_calibration()
    worst = compare_allreduce(sizes, args.rounds, args.budget)
    record(NAME, [
        Figure("quick collectives calibration wall time", wall_s, "s", TARGET_CALIBRATION_S),
        Figure(f"largest median disagreement with a hand loop ({args.budget} budget)", worst * 100, "%",
               TARGET_DISAGREEMENT_PCT),
    ], args.results)
    return 0
