"""First touch of a fresh host tensor: its fit from profiler.bench_memory's `alloc` points and its cost.

With glibc serving blocks of at least the mmap threshold (profiler.allocator: 32 MiB) by mmap and unmapping them on
free, every such tensor a training step allocates (a layer's output, an input or weight gradient) arrives as fresh
pages the kernel faults in on first write. The `alloc` benchmark writes a tensor of S bytes freshly allocated and
one allocated once; per threshold multiple

    s_per_byte = (t_fresh - t_reused) / S

and the fit keeps the median over the sizes (2-core VM: 0.64-0.74 ns per byte, about 2.7 us per 4 KiB page, so a
47 MB activation costs 30 ms more than its kernel; a ReLU writing one took 30 ms against 4 ms predicted). A call
allocating tensors of b_1, b_2, ... bytes costs

    first_touch_s = s_per_byte * sum(b_i for b_i >= threshold)

on top of its kernel. The compute benchmarks allocate their results as training does, except the calls they time
writing into a preallocated tensor (calibrate.shapes.PREALLOCATED_IN_BENCHMARK: a GEMM, a ReLU forward, an add):
calibrate.cost_model adds first_touch_s of the tensors a call allocates in training and not in its benchmark
(shapes.allocations minus shapes.benchmark_allocations), and to a call of any family whose benchmarks never
allocated a tensor of the threshold (ComputeFit.largest_allocation_bytes below it): its fitted curve holds no first
touch, whatever the call allocates at or above the threshold is extra. Taking it off the benchmark samples that allocated
such a tensor as well, and adding it to every call, left the efficiency curves too fast just below the
threshold (random nets, seeds 11-13: 78.0 -> 76.3%); not done.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Optional, Sequence

import numpy as np

from calibrate.coefficients import FirstTouchFit
from profiler.errors import UserError
from profiler.profile import Sample


def fit_first_touch(samples: Sequence[Sample]) -> Optional[FirstTouchFit]:
    """s_per_byte of the module docstring from `alloc` samples (None without a fresh/reused pair)."""
    by_size: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    for s in samples:
        size, threshold = s.params.get("bytes"), s.params.get("threshold_bytes")
        if not isinstance(size, int) or not isinstance(threshold, int) or size <= 0 or threshold <= 0:
            raise UserError("alloc sample needs integer params.bytes and params.threshold_bytes > 0")
        by_size[(size, threshold)][s.variant] = float(np.median(s.times_s))
    rates, thresholds = [], set()
    for (size, threshold), times in sorted(by_size.items()):
        if "fresh" in times and "reused" in times:
            rates.append(max(0.0, times["fresh"] - times["reused"]) / size)
            thresholds.add(threshold)
    if not rates:
        return None
    if len(thresholds) > 1:
        raise UserError(f"alloc samples were measured under different mmap thresholds {sorted(thresholds)}")
    sizes = ", ".join(f"{size / 2**20:.0f} MiB" for size, _ in sorted(by_size))
    return FirstTouchFit(s_per_byte=float(np.median(rates)), threshold_bytes=float(thresholds.pop()),
                         sources=[f"measured: fresh vs reused float32 tensors of {sizes} written once "
                                  "(profiler.bench_memory.first_touch_cases; median over sizes)"])


def cost_s(fit: Optional[FirstTouchFit], sizes: Iterable[float]) -> float:
    """first_touch_s of the module docstring (0 without a fit)."""
    if fit is None:
        return 0.0
    return fit.s_per_byte * sum(b for b in sizes if b >= fit.threshold_bytes)
