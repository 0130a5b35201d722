"""The one timing harness every benchmark uses: Timer -> Measurement (after torch.utils.benchmark).

Method (docs/calibration.md "Timing harness"; as torch.utils.benchmark and triton.testing.do_bench time):
warm up, then take timed samples and keep every one. On CPU a sample is `time.perf_counter_ns` around
`number` back-to-back calls (chosen so one sample is long enough to dwarf the clock's resolution). On CUDA a
sample is a pair of CUDA events around the calls, with the L2 cache flushed before each sample (a write of a
buffer larger than L2), so every sample starts cold. Sampling is adaptive: it stops when the distribution-free
95% confidence interval of the median is within `target_rel_ci` of the median, or when the time budget runs out.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 2**20  # >= 2x the largest current L2 (H200/B200 ~50-126 MB), as triton's do_bench flushes


@dataclass
class Measurement:
    """Per-call times of one benchmark, every sample kept, with the statistics the profile reports."""

    times_s: list[float]
    number: int  # calls per sample; times_s are already divided by it
    device: str
    threads: int
    label: str = ""
    stopped_by: str = ""  # "converged", "budget" or "max_samples"

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def iqr_s(self) -> float:
        if len(self.times_s) < 2:
            return 0.0
        q = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def cv(self) -> float:
        """Coefficient of variation (population std / mean), as nccl-tests reports it."""
        mean = statistics.fmean(self.times_s)
        return statistics.pstdev(self.times_s) / mean if mean > 0 else 0.0

    @property
    def median_rel_ci(self) -> float:
        """Half-width of the 95% CI of the median, relative to the median (inf with too few samples)."""
        return median_rel_ci(self.times_s)

    def summary(self) -> dict:
        return {
            "median_s": self.median_s,
            "min_s": self.min_s,
            "iqr_s": self.iqr_s,
            "cv": self.cv,
            "median_rel_ci": self.median_rel_ci,
            "samples": len(self.times_s),
        }


def median_rel_ci(times_s: list[float], z: float = 1.96) -> float:
    """Distribution-free CI of the median from order statistics: ranks n/2 -+ z*sqrt(n)/2."""
    n = len(times_s)
    if n < 3:
        return math.inf
    ordered = sorted(times_s)
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    med = statistics.median(ordered)
    if med <= 0:
        return math.inf
    return (ordered[hi] - ordered[lo]) / 2 / med


def _is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


class _CpuClock:
    """perf_counter_ns around `number` calls; with an eviction buffer, around each call after writing the
    buffer (untimed), so every call starts with cold caches."""

    def __init__(self, evict_bytes: int = 0):
        self.evict = torch.empty(evict_bytes // 4, dtype=torch.float32) if evict_bytes else None

    def time(self, fn: Callable[[], object], number: int) -> float:
        if self.evict is None:
            start = time.perf_counter_ns()
            for _ in range(number):
                fn()
            return (time.perf_counter_ns() - start) * 1e-9
        elapsed = 0
        for _ in range(number):
            self.evict.fill_(1.0)
            start = time.perf_counter_ns()
            fn()
            elapsed += time.perf_counter_ns() - start
        return elapsed * 1e-9


class _CudaClock:
    """CUDA events around `number` calls, L2 flushed before each sample."""

    def __init__(self, device: str, flush_l2: bool):
        self.device = torch.device(device)
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=self.device) if flush_l2 else None
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def time(self, fn: Callable[[], object], number: int) -> float:
        if self.flush is not None:
            self.flush.zero_()
        self.start.record()
        for _ in range(number):
            fn()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1e-3  # events report milliseconds


class Timer:
    """Times `fn` on `device`; `measure()` returns a Measurement of per-call seconds.

    warmup_s: time spent calling fn before sampling (>= 25 ms recommended: triton.testing.do_bench's default).
    min_sample_s: a sample batches calls until it lasts at least this long (clock resolution, launch jitter).
    target_rel_ci: stop once the median's 95% CI half-width is within this fraction of the median.
    budget_s: stop after this much sampling time even if not converged (min_samples is always taken:
              with fewer, a point's spread is unknown and comparisons between profiles over-react).
    cold_evict_bytes: on CPU, write a buffer this large (untimed) before every call and time calls one by
              one: for work that in training follows enough other work to have evicted the caches.
    """

    def __init__(
        self,
        fn: Callable[[], object],
        *,
        device: str = "cpu",
        label: str = "",
        warmup_s: float = 0.025,
        min_sample_s: float = 2e-4,
        min_samples: int = 5,
        max_samples: int = 100,
        target_rel_ci: float = 0.02,
        budget_s: float = 1.0,
        flush_l2: bool = True,
        cold_evict_bytes: int = 0,
    ):
        if min_samples < 1 or max_samples < min_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")
        if budget_s <= 0 or target_rel_ci <= 0:
            raise ValueError("budget_s and target_rel_ci must be positive")
        self.fn = fn
        self.device = str(device)
        self.label = label
        self.warmup_s = warmup_s
        self.min_sample_s = min_sample_s
        self.min_samples = min_samples
        self.max_samples = max_samples
        self.target_rel_ci = target_rel_ci
        self.budget_s = budget_s
        self.flush_l2 = flush_l2
        self.cold_evict_bytes = cold_evict_bytes

    def _sync(self) -> None:
        if _is_cuda(self.device):
            torch.cuda.synchronize(torch.device(self.device))

    def _calls_per_sample(self, clock) -> int:
        """Warm up for warmup_s, and find how many calls make one sample last min_sample_s."""
        number, spent = 1, 0.0
        deadline = time.perf_counter() + self.warmup_s
        while True:
            elapsed = clock.time(self.fn, number)
            self._sync()
            spent += elapsed
            if time.perf_counter() >= deadline:
                break
            if elapsed < self.min_sample_s:
                number = min(number * 2, 1 << 20)
        per_call = max(elapsed / number, 1e-9)
        return max(1, math.ceil(self.min_sample_s / per_call))

    def measure(self) -> Measurement:
        cold = self.cold_evict_bytes and not _is_cuda(self.device)
        clock = _CudaClock(self.device, self.flush_l2) if _is_cuda(self.device) else _CpuClock(self.cold_evict_bytes)
        self._sync()
        number = self._calls_per_sample(clock)
        if cold:
            number = 1
        times: list[float] = []
        started = time.perf_counter()
        stopped_by = "max_samples"
        while len(times) < self.max_samples:
            times.append(clock.time(self.fn, number) / number)
            self._sync()
            if len(times) >= self.min_samples and median_rel_ci(times) <= self.target_rel_ci:
                stopped_by = "converged"
                break
            if time.perf_counter() - started >= self.budget_s and len(times) >= self.min_samples:
                stopped_by = "budget"
                break
        return Measurement(
            times_s=times,
            number=number,
            device=self.device,
            threads=torch.get_num_threads(),
            label=self.label,
            stopped_by=stopped_by,
        )
