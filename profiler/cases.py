"""A benchmark point (BenchCase) and how one is measured into a Sample; shared by every benchmark family
that times a single-process callable (compute, memory, host<->device)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Optional

from profiler.profile import Sample
from profiler.timing import Timer

GRID_ENV = "PARAORACLE_GRID"  # "tiny": a test-only grid of a few small points per family (README, calibration)


@dataclass
class BenchCase:
    """One benchmark point. `build` allocates the operands and returns the callable to time; it runs only
    when the point is measured, so tensors live only while their point runs. `tags` (e.g. the archetype
    layer, the split, TF32 flags) go to Sample.extra."""

    benchmark: str
    variant: str
    params: dict
    dtype: str
    flops: Optional[int]
    bytes_moved: Optional[int]
    build: Callable[[], Callable[[], object]] = field(repr=False)
    tags: dict = field(default_factory=dict)
    #: time every call with the CPU caches evicted first (2x the last-level cache written, untimed)
    cold: bool = False

    @property
    def label(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.benchmark} {self.variant} {self.dtype} {shape}"


def measure_case(case: BenchCase, device: str, timer_kwargs: dict) -> Sample:
    """Build the case, time it with the one harness, keep every per-call time."""
    fn = case.build()
    if device.startswith("cuda"):
        fn()  # cudnn.benchmark autotunes on a shape's first call, which can outlast the timer's warm-up
    evict = 0
    if case.cold and not device.startswith("cuda"):
        from profiler.bench_memory import cpu_last_level_cache_bytes

        evict = 2 * cpu_last_level_cache_bytes()
    m = Timer(fn, device=device, label=case.label, cold_evict_bytes=evict, **timer_kwargs).measure()
    return Sample(benchmark=case.benchmark, variant=case.variant, params=case.params, device=device,
                  dtype=case.dtype, threads=m.threads, times_s=m.times_s, flops=case.flops,
                  bytes_moved=case.bytes_moved,
                  extra={**case.tags, "calls_per_sample": m.number, "stopped_by": m.stopped_by,
                         **({"cold_evict_bytes": evict} if evict else {})})


def compute_passes(device: str) -> int:
    """How many times the compute section sweeps its shapes (calibrate.fit keeps each shape's fastest pass).
    CPU: 2. On the 2-core VM a one-thread quick calibration repeats each shape within 2% (median) when
    undisturbed, yet two whole calibrations in four (2026-11-30) had a 5-10 s window in which every call ran
    10-70% slower, enough to lift conv3d fits from 13% to 18-27% held-out error; the second pass runs a whole
    sweep later, outside such a window, with half the per-point warm-up and budget each. GPU: 1 (CUDA-event
    times of one kernel; no such windows were measured)."""
    return 1 if device.startswith("cuda") else 2


def timer_settings(device: str, quick: bool) -> dict:
    """Timer keyword arguments per mode; recorded in the profile's settings."""
    if os.environ.get(GRID_ENV) == "tiny":
        return dict(warmup_s=0.005, budget_s=0.02, min_samples=3, max_samples=10, target_rel_ci=0.05)
    if device.startswith("cuda"):
        return dict(warmup_s=0.025, budget_s=0.1, min_samples=5, max_samples=50,
                    target_rel_ci=0.02)
    if quick:
        # a point's sampling noise (0.2-1% of its median) is a twentieth of the fits' held-out errors (5-20%, the
        # shape model's misfit): a quick point takes 2 samples per pass, more only while its budget lasts and
        # its median is not yet within 5%, instead of 5 within 3%
        return dict(warmup_s=0.004, budget_s=0.03, min_samples=2, max_samples=15, target_rel_ci=0.05)
    return dict(warmup_s=0.05, budget_s=0.5, min_samples=5, max_samples=100, target_rel_ci=0.02)
