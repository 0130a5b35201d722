"""Timing of one collective at one size on one group, in the regimes nccl-tests distinguishes and the one training
meets (docs/calibration.md "Collectives"):

- latency: barrier, one timed op, maximum over ranks of each iteration (≈ nccl-tests `-z 3 -I 1`);
- throughput: barrier, m back-to-back ops, one synchronisation, per-op time = elapsed / m, maximum over ranks;
- interleaved: each op after about INTERLEAVE_S of compute on every rank, no barrier, maximum over ranks, measured
  round-robin over all sizes of one operation (`measure_interleaved`): what a training step pays
  (docs/decisions/2026-11-30-interleaved-collectives.md).
Per-rank adaptive stopping would deadlock a collective, so iteration counts are fixed per point from a warm-up
estimate agreed by a MAX all-reduce (hence not profiler.timing.Timer). Clocks: perf_counter on CPU (gloo calls
block); CUDA events on GPU (NCCL enqueues on the current stream).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist


@dataclass(frozen=True)
class PointBudget:
    """How much time and how many iterations one (operation, size, group) point may take."""

    seconds: float  # per regime, after warm-up
    warmup_calls: int
    latency_min: int
    latency_max: int
    throughput_samples: int
    throughput_max_ops: int
    #: interleaved rounds over all sizes (fewer where a sweep would outlast half the timeout: sweep_rounds): their
    #: mean is what a fit uses, and one slow call in three is common over gloo
    #: (docs/decisions/2026-11-30-interleaved-collectives.md, held-out errors by round count)
    interleaved_iterations: int
    #: the same on GPUs: NCCL timed by CUDA events has no gloo wake-up tail, and 120 rounds of 1 ms of compute
    #: per size would take a minute per (operation, group) on an 8-GPU node; 30 as before round-robin
    gpu_interleaved_iterations: int = 30
    #: adaptive sweeps (None: every size gets every round): after `min_rounds`, and then every
    #: ADAPTIVE_BLOCK rounds, a size whose mean is known to within this relative standard error leaves the
    #: sweep. Large messages (a few % spread per call) leave after min_rounds; small ones, whose mean holds
    #: gloo's wake-up tail (per-call spread about 100% of the mean), keep the full count.
    target_rel_sem: float | None = None
    min_rounds: int = 20

    def rounds(self, device: str) -> int:
        """Interleaved rounds on this device ("cpu" or "cuda")."""
        return self.gpu_interleaved_iterations if str(device).startswith("cuda") else self.interleaved_iterations


#: compute before each interleaved op: a layer's worth of work between two collectives
INTERLEAVE_S = 1e-3

QUICK = PointBudget(seconds=0.02, warmup_calls=1, latency_min=3, latency_max=10, throughput_samples=3, throughput_max_ops=10,
                    interleaved_iterations=120, target_rel_sem=0.05)
FULL = PointBudget(seconds=0.3, warmup_calls=5, latency_min=5, latency_max=100, throughput_samples=10, throughput_max_ops=100,
                   interleaved_iterations=120)


#: the interleaved sweep holds the buffers of all its sizes at once; sizes are swept in consecutive chunks
#: whose message sizes add up to at most this
SWEEP_BYTES = 64 * 2**20
#: the fewest rounds sweep_rounds cuts a sweep to
MIN_SWEEP_ROUNDS = 10
#: rounds between two checks of an adaptive sweep (PointBudget.target_rel_sem)
ADAPTIVE_BLOCK = 10


@dataclass
class PointTimes:
    latency_s: list[float]  # per iteration, max over ranks
    throughput_s: list[float]  # per sample, per op, max over ranks
    ops_per_sample: int
    warmup_estimate_s: float


class SweepFailure(Exception):
    """A call of the interleaved sweep raised; index says which of its calls (the cause is chained)."""

    def __init__(self, index: int):
        super().__init__(f"interleaved sweep call {index}")
        self.index = index


class _Clock:
    """Seconds taken by `calls` runs of fn: perf_counter on CPU, CUDA events on GPU."""

    def __init__(self, device: str):
        self.cuda = str(device).startswith("cuda")
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time(self, fn: Callable[[], None], calls: int) -> float:
        if self.cuda:
            self.start.record()
            for _ in range(calls):
                fn()
            self.end.record()
            self.end.synchronize()
            return self.start.elapsed_time(self.end) * 1e-3  # events report milliseconds
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return time.perf_counter() - start


def max_over_group(values: list[float], group, device: str) -> list[float]:
    """Element-wise maximum of each rank's values across the group (a MAX all-reduce)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
    return tensor.tolist()


def _clamp(value: float, low: int, high: int) -> int:
    return int(min(high, max(low, math.ceil(value))))


def measure_point(fn: Callable[[], None], group, device: str, budget: PointBudget) -> PointTimes:
    """Warm up, then time fn in the latency and the throughput regime. Every group member must call this
    with the same budget; all get the same result."""
    clock = _Clock(device)
    clock.sync()
    warm = [clock.time(fn, 1) for _ in range(budget.warmup_calls)]
    estimate_s = max(max_over_group([warm[-1]], group, device)[0], 1e-7)

    iterations = _clamp(budget.seconds / estimate_s, budget.latency_min, budget.latency_max)
    latency = []
    for _ in range(iterations):
        dist.barrier(group=group)
        clock.sync()
        latency.append(clock.time(fn, 1))

    ops = _clamp(budget.seconds / (budget.throughput_samples * estimate_s), 1, budget.throughput_max_ops)
    throughput = []
    for _ in range(budget.throughput_samples):
        dist.barrier(group=group)
        clock.sync()
        throughput.append(clock.time(fn, ops) / ops)

    merged = max_over_group(latency + throughput, group, device)
    return PointTimes(merged[:iterations], merged[iterations:], ops, estimate_s)


def sweep_chunks(sizes_bytes: list[int], limit_bytes: int = SWEEP_BYTES) -> list[list[int]]:
    """Indices of sizes_bytes in consecutive chunks whose sizes add up to at most limit_bytes (a size over
    the limit gets a chunk of its own)."""
    chunks, total = [[]], 0
    for i, size in enumerate(sizes_bytes):
        if chunks[-1] and total + size > limit_bytes:
            chunks.append([])
            total = 0
        chunks[-1].append(i)
        total += size
    return chunks


def sweep_rounds(estimates_s: list[float], most_rounds: int, max_seconds: float) -> int:
    """Rounds of one interleaved sweep, which reports no progress until it ends and which ranks outside the
    group wait for (both under the per-collective timeout): most_rounds, fewer when the sweep would run past
    max_seconds, at least MIN_SWEEP_ROUNDS. A round is costed as INTERLEAVE_S of compute plus 3x each op's warm-up
    time (an op after compute took up to 3x its back-to-back time over gloo). Every rank gets the same count from
    the group-agreed estimates."""
    round_s = sum(INTERLEAVE_S + 3 * e for e in estimates_s)
    return max(MIN_SWEEP_ROUNDS, min(most_rounds, int(max_seconds / round_s)))


def rel_sem(values: list[float]) -> float:
    """Standard error of the mean relative to the mean (inf with fewer than 2 values)."""
    if len(values) < 2:
        return math.inf
    mean = float(np.mean(values))
    return float(np.std(values, ddof=1)) / math.sqrt(len(values)) / mean if mean > 0 else math.inf


def measure_interleaved(calls: list[Callable[[], None]], group, device: str, rounds: int, *,
                        target_rel_sem: float | None = None, min_rounds: int = 0) -> list[list[float]]:
    """Per call, up to `rounds` times of one op after INTERLEAVE_S of compute, maximum over ranks; each round
    runs every call still in the sweep once, in an order shuffled per round (seeded by the round number, so
    every rank runs the same order): the op before a call leaves its mark on it, so no size always follows the
    same one (docs/decisions/2026-11-30-interleaved-collectives.md). With target_rel_sem, the sweep is checked
    after min_rounds and every ADAPTIVE_BLOCK rounds after that, and a call whose mean's relative standard error
    (rel_sem) is within the target leaves it; every rank decides from the same merged times, so all agree. Every
    group member must call this with the same arguments. A call that raises becomes SweepFailure(its index)."""
    clock = _Clock(device)
    filler = compute_filler(device)
    times: list[list[float]] = [[] for _ in calls]
    active, done = list(range(len(calls))), 0
    while active and done < rounds:
        step = rounds - done
        if target_rel_sem is not None:
            step = min(step, max(min_rounds - done, ADAPTIVE_BLOCK))
        local: dict[int, list[float]] = {i: [] for i in active}
        for r in range(done, done + step):
            for j in np.random.default_rng(r).permutation(len(active)).tolist():
                i = active[j]
                filler()
                try:
                    local[i].append(clock.time(calls[i], 1))
                except Exception as err:  # noqa: BLE001 - the caller names the size from the index
                    raise SweepFailure(i) from err
        merged = max_over_group([t for i in active for t in local[i]], group, device)
        for k, i in enumerate(active):
            times[i] += merged[k * step:(k + 1) * step]
        done += step
        if target_rel_sem is not None and done >= min_rounds:
            active = [i for i in active if rel_sem(times[i]) > target_rel_sem]
    return times


_FILLERS: dict[str, Callable[[], None]] = {}


def compute_filler(device: str) -> Callable[[], None]:
    """A callable that keeps this rank's device busy for about INTERLEAVE_S (repeated 128^3 matmuls, the
    count set once per device from a timed trial)."""
    if device not in _FILLERS:
        a = torch.randn(128, 128, device=device)
        clock = _Clock(device)
        clock.sync()
        clock.time(lambda: torch.mm(a, a), 3)
        per_call_s = max(clock.time(lambda: torch.mm(a, a), 10) / 10, 1e-7)
        repeats = max(1, round(INTERLEAVE_S / per_call_s))

        def fill() -> None:
            for _ in range(repeats):
                torch.mm(a, a)
            clock.sync()

        _FILLERS[device] = fill
    return _FILLERS[device]
