"""The host backend's own coefficients, fitted from a CPU profile's samples: the convolution weight floor and its
im2col part, the 3-D column floor and the first-touch rate. calibrate.backends.host applies them; the method is
docs/method.md §3, the measurements docs/calibration.md ("Host backend").
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Optional, Sequence

import numpy as np

from calibrate import shapes
from calibrate.backends.host import im2col_columns, is_weight_design, onednn_gemm_conv, onednn_gemm_weight_grad
from calibrate.coefficients import ColumnFloor, ConvWeightFit, FirstTouchFit, Im2colFloor
from calibrate.cost_api import PASSES
from profiler.errors import UserError
from profiler.profile import Sample

#: the quantile of time / columns over the column regime's samples kept as the column floor's rate (the fixed
#: costs of small calls raise the others' ratio)
COLUMN_QUANTILE = 10.0


# ----------------------------------------------------------------------------------------- weight floor
def _im2col_design(sample: Sample) -> bool:
    """A design shape oneDNN runs as im2col + GEMM (its 7x7 kernels on a 2x2 map), told by the rule itself."""
    return onednn_gemm_conv(sample.benchmark, "fwd", sample.params, sample.dtype, sample.threads or 1)


def _fastest(samples: Sequence[Sample], passes: Sequence[str]) -> tuple[dict[tuple[str, float, int], float],
                                                                        dict[float, set[int]]]:
    """(fastest median per (pass, weight bytes, batch), batches per weight) of design samples."""
    best: dict[tuple[str, float, int], float] = {}
    batches: dict[float, set[int]] = defaultdict(set)
    for s in samples:
        if s.variant not in passes:
            continue
        weight, n = shapes.conv_weight_bytes(s.benchmark, s.params, s.dtype), int(s.params["N"])
        best[s.variant, weight, n] = min(best.get((s.variant, weight, n), math.inf), float(np.median(s.times_s)))
        batches[weight].add(n)
    return best, batches


def _per_sample_fit(best, batches, passes, per_sample_passes):
    """Per complete weight size (every pass at batch 1 and a larger one): (sizes, a per pass, b per pass of
    per_sample_passes) with b = (t(N_max) - t(1)) / ((N_max - 1) W) and a = t(1) / W - b there (a = t(1) / W
    for the other passes)."""
    sizes, a, b = [], {p: [] for p in passes}, {p: [] for p in per_sample_passes}
    for weight in sorted(batches):
        ns = sorted(batches[weight])
        lo, hi = ns[0], ns[-1]
        if lo != 1 or hi == lo or any((p, weight, n) not in best for p in passes for n in (lo, hi)):
            continue
        sizes.append(weight)
        for p in passes:
            slope = 0.0
            if p in per_sample_passes:
                slope = max(0.0, (best[p, weight, hi] - best[p, weight, lo]) / ((hi - lo) * weight))
                b[p].append(slope)
            a[p].append(max(0.0, best[p, weight, lo] / weight - slope))
    return sizes, a, b


def fit_conv_weight(samples: Sequence[Sample]) -> Optional[ConvWeightFit]:
    """The weight floor's per-byte figures from the weight-design samples among `samples` (None without a complete
    design: every pass at two batches of each weight size), with the fastest median per shape; the design's im2col
    shapes (onednn_gemm_conv) give ConvWeightFit.im2col from their forward and backward-data passes."""
    design = [s for s in samples if is_weight_design(s)]
    best, batches = _fastest([s for s in design if not _im2col_design(s)], PASSES)
    sizes, a, b = _per_sample_fit(best, batches, PASSES, ("bwd_weight",))
    if not sizes:
        return None
    im2col_passes = ("fwd", "bwd_data")
    g_best, g_batches = _fastest([s for s in design if _im2col_design(s)], im2col_passes)
    g_sizes, g_a, g_b = _per_sample_fit(g_best, g_batches, im2col_passes, im2col_passes)
    im2col = Im2colFloor(weight_bytes=g_sizes, s_per_byte=g_a, per_sample_s_per_byte=g_b) if g_sizes else None
    mb = ", ".join(f"{w / 1e6:.1f} MB" for w in sizes)
    sources = [f"measured: weight-bound 3x3 convolutions on a 2x2 map, weights {mb}, "
               "batches 1 and the design's largest (calibrate.backends.host_fit)"]
    if im2col:
        sources.append(f"measured: im2col 7x7 convolutions on a 2x2 map, weights "
                       f"{', '.join(f'{w / 1e6:.1f} MB' for w in g_sizes)}, forward and backward-data, batches 1 and "
                       "the design's largest (calibrate.backends.host_fit)")
    return ConvWeightFit(weight_bytes=sizes, s_per_byte=a, per_sample_s_per_byte=b["bwd_weight"], im2col=im2col,
                         sources=sources)


# ----------------------------------------------------------------------------------------- column floor
def fit_conv_columns(samples: Sequence[Sample]) -> Optional[ColumnFloor]:
    """s_per_column: the COLUMN_QUANTILE-th percentile of time / im2col_columns over the 3-D weight-gradient
    samples oneDNN ran as im2col + GEMM (None without any)."""
    rates = [float(np.mean(s.times_s)) / im2col_columns(s.benchmark, s.params) for s in samples
             if s.benchmark == "conv3d" and s.variant == "bwd_weight"
             and onednn_gemm_weight_grad(s.benchmark, s.variant, s.params, s.dtype, s.threads or 1)]
    if not rates:
        return None
    return ColumnFloor(s_per_column=float(np.percentile(rates, COLUMN_QUANTILE)), samples=len(rates),
                       sources=[f"measured: {len(rates)} 3-D weight-gradient samples oneDNN ran as im2col + GEMM, "
                                f"{COLUMN_QUANTILE:.0f}th percentile of time per column element "
                                "(calibrate.backends.host_fit)"])


# ----------------------------------------------------------------------------------------- first touch
def fit_first_touch(samples: Sequence[Sample]) -> Optional[FirstTouchFit]:
    """s_per_byte = median over sizes of (t_fresh - t_reused) / S from profiler.bench_memory's `alloc` points
    (a tensor of S bytes written freshly allocated and allocated once); None without a fresh/reused pair."""
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
