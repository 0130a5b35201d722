"""Collectives benchmark figures (prints; asserts nothing):

1. Wall time of the quick CPU collectives calibration with 2 gloo ranks, through the CLI:
   `profiler calibrate --device cpu --ranks 2 --quick --only collectives` (target: under 90 s).
2. Agreement of the profiler's allreduce medians with a plain hand-written torch.distributed.all_reduce
   timing loop run in the same process group (target: within 15%), in both regimes:
   latency (barrier, one op, max over ranks per iteration) and throughput (back-to-back ops, one sync).
   Profiler and hand loop alternate in short rounds per size so machine load affects both alike; the hand
   loop's even-vs-odd-round difference is printed as the noise floor.

    python bench/bench_collectives.py [--skip-calibration] [--sizes 4,4096,65536,1048576,16777216] [--rounds 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def time_quick_calibration() -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "collectives.yaml"
        command = [sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--ranks", "2", "--quick",
                   "--only", "collectives", "--out", str(out)]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            print(f"quick calibration FAILED (exit {done.returncode}): {done.stderr.strip().splitlines()[-1]}")
            return
        from profiler.profile import load_profile

        profile = load_profile(out)
        inside_s = profile.settings.get("duration_s")
        print(f"quick CPU collectives calibration, 2 gloo ranks: {wall_s:.1f} s wall (command start to exit; "
              f"{inside_s} s inside the command), {len(profile.samples)} samples; target < 90 s: "
              f"{'OK' if wall_s < 90 else 'MISSED'}")
        print(f"  ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")


def hand_loop(size_bytes: int, iterations: int, ops_per_sample: int, samples: int):
    """Independent reference: plain torch.distributed calls, perf_counter, max over ranks via all_gather_object.
    Returns (latency times, throughput per-op times)."""
    import torch

    buf = torch.zeros(size_bytes // 4, dtype=torch.float32)
    dist.all_reduce(buf)  # warm-up
    latency = []
    for _ in range(iterations):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(buf)
        latency.append(time.perf_counter() - start)
    throughput = []
    for _ in range(samples):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(ops_per_sample):
            dist.all_reduce(buf)
        throughput.append((time.perf_counter() - start) / ops_per_sample)
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (latency, throughput))
    latency = [max(values) for values in zip(*(g[0] for g in gathered))]
    throughput = [max(values) for values in zip(*(g[1] for g in gathered))]
    return latency, throughput


def compare_rank(rank: int, world: int, port: int, sizes: list[int], rounds: int, results) -> None:
    """Per size, `rounds` alternating rounds of the profiler's own allreduce point (kernel + harness, the
    --quick budget) and the hand loop with the same iteration counts; every time pooled per method."""
    import torch

    from kernels.collectives import allreduce
    from profiler.comm.harness import QUICK, measure_point

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    world_group = dist.new_group(list(range(world)))
    rows = []
    for size in sizes:
        pooled = {"profiler": ([], []), "hand": ([], []), "hand_even": ([], []), "hand_odd": ([], [])}
        for index in range(rounds):
            call = allreduce.setup(size, world_group, list(range(world)), rank, "cpu", torch.float32)
            times = measure_point(call, world_group, "cpu", QUICK)
            hand = hand_loop(size, len(times.latency_s), times.ops_per_sample, len(times.throughput_s))
            for key, (lat, thr) in (("profiler", (times.latency_s, times.throughput_s)), ("hand", hand),
                                    ("hand_even" if index % 2 == 0 else "hand_odd", hand)):
                pooled[key][0].extend(lat)
                pooled[key][1].extend(thr)
        rows.append((size, {key: tuple(statistics.median(v) for v in values) for key, values in pooled.items()}))
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def compare_allreduce(sizes: list[int], rounds: int) -> None:
    from profiler.comm.launch import check_local_port

    port = check_local_port("127.0.0.1", None)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=compare_rank, args=(r, 2, port, sizes, rounds, results)) for r in range(2)]
    for p in procs:
        p.start()
    rows = results.get(timeout=900)
    for p in procs:
        p.join()
    print(f"allreduce, 2 gloo ranks: profiler (kernel + harness, --quick budget) vs a hand-written loop, "
          f"{rounds} alternating rounds, medians of all pooled times; noise = hand loop's even vs odd rounds")
    print(f"{'size (B)':>10} | {'latency: profiler':>17} {'hand':>10} {'diff':>7} {'noise':>6} | "
          f"{'throughput: profiler':>20} {'hand':>10} {'diff':>7} {'noise':>6}")
    worst = 0.0
    for size, m in rows:
        cells = []
        for regime in (0, 1):
            mine, hand = m["profiler"][regime], m["hand"][regime]
            diff, noise = mine / hand - 1, m["hand_even"][regime] / m["hand_odd"][regime] - 1
            worst = max(worst, abs(diff))
            cells.append(f"{mine * 1e6:>14.1f} us {hand * 1e6:>7.1f} us {diff:>+7.1%} {noise:>+6.0%}")
        print(f"{size:>10} | {cells[0]} | {cells[1]}")
    print(f"largest disagreement {worst:.1%}; target within 15%: {'OK' if worst <= 0.15 else 'MISSED'} "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; compare with the noise columns)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-calibration", action="store_true", help="only the allreduce comparison")
    parser.add_argument("--sizes", default="4,4096,65536,1048576,16777216", help="allreduce sizes in bytes")
    parser.add_argument("--rounds", type=int, default=10, help="alternating profiler/hand rounds per size")
    args = parser.parse_args()
    if not args.skip_calibration:
        time_quick_calibration()
    compare_allreduce([int(s) for s in args.sizes.split(",")], args.rounds)


if __name__ == "__main__":
    main()
