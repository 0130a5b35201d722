"""A benchmark point (BenchCase) and how one is measured into a Sample; shared by every benchmark family
that times a single-process callable (compute, memory, host<->device)."""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Callable, Optional

from profiler import caches
from profiler.profile import Sample
from profiler.timing import Timer

GRID_ENV = "PARAORACLE_GRID"  # "tiny": a test-only grid of a few small points per family (README, calibration)
#: a rotating CPU compute point cycles through operand copies adding up to this many times the last-level cache,
#: so that each call finds its operands in memory, not in a cache the previous call of the same point warmed
ROTATION_LLC_MULTIPLE = 1.5
#: ... and a GPU point through copies adding up to this many times the L2 (an H100's L2 is two partitions that
#: may each hold a copy of a line, and is not strictly LRU: twice its size leaves none of a set's lines behind)
ROTATION_L2_MULTIPLE = 2.0
#: at most this many operand copies: a point of a few KB stays cache-resident, as such a layer is in training
MAX_OPERAND_COPIES = 64


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
    #: cycle through copies of the operands (operand_copies) instead of calling on one hot set
    rotate: bool = False

    @property
    def label(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.benchmark} {self.variant} {self.dtype} {shape}"


def operand_copies(bytes_moved: Optional[int], llc_bytes: int, multiple: float = ROTATION_LLC_MULTIPLE) -> int:
    """Operand sets a rotating point cycles through: ceil(multiple * LLC / bytes), 1 to MAX_OPERAND_COPIES (bytes:
    the point's compulsory traffic, every operand and result once; multiple: ROTATION_LLC_MULTIPLE on a CPU,
    ROTATION_L2_MULTIPLE on a GPU)."""
    if not bytes_moved or bytes_moved <= 0:
        return 1
    return max(1, min(MAX_OPERAND_COPIES, math.ceil(multiple * llc_bytes / bytes_moved)))


def rotating(build: Callable[[], Callable[[], object]], copies: int) -> Callable[[], object]:
    """Build `copies` independent calls (each with its own operands) and return one that runs them in turn."""
    if copies <= 1:
        return build()
    calls = itertools.cycle([build() for _ in range(copies)])
    return lambda: next(calls)()


def measure_case(case: BenchCase, device: str, timer_kwargs: dict, llc_bytes: int = 0) -> Sample:
    """Build the case, time it with the one harness, keep every per-call time. A `rotate` case with the last-level
    cache size given (a GPU's: its L2) cycles through operand_copies() operand sets: a layer in a training step
    reads weights last touched a whole step earlier and activations saved in the forward pass, which a point
    called back to back on one operand set would find in cache (docs/decisions/2026-12-02-rotating-operands.md).
    On a GPU the timer's L2 flush only makes each sample's first call cold; the copies make every call so, and the
    first call runs before the timer: cudnn.benchmark searches a shape's algorithms then (the copies share its
    choice)."""
    gpu = device.startswith("cuda")
    copies = (operand_copies(case.bytes_moved, llc_bytes, ROTATION_L2_MULTIPLE if gpu else ROTATION_LLC_MULTIPLE)
              if case.rotate and llc_bytes else 1)
    fn = rotating(case.build, copies)
    if gpu:
        fn()  # cudnn.benchmark autotunes on a shape's first call, which can outlast the timer's warm-up
    evict = 0
    if case.cold and not device.startswith("cuda"):
        evict = 2 * caches.cpu_last_level_cache_bytes()
    m = Timer(fn, device=device, label=case.label, cold_evict_bytes=evict, **timer_kwargs).measure()
    return Sample(benchmark=case.benchmark, variant=case.variant, params=case.params, device=device,
                  dtype=case.dtype, threads=m.threads, times_s=m.times_s, flops=case.flops,
                  bytes_moved=case.bytes_moved,
                  extra={**case.tags, "calls_per_sample": m.number, "stopped_by": m.stopped_by,
                         **({"cold_evict_bytes": evict} if evict else {}),
                         **({"operand_copies": copies} if copies > 1 else {})})


def compute_passes(device: str) -> int:
    """How many times the compute section sweeps its shapes (calibrate.fit pools them). CPU: 2, each with half
    the per-point warm-up and budget, so that a slow window of the machine lands in one sweep only
    (docs/decisions/2026-11-30-two-compute-sweeps.md). GPU: 1 (CUDA-event times of one kernel; no such windows
    were measured)."""
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
