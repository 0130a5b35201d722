"""A CPU convolution's time floor from its weight, fitted from profiler.bench_compute's weight-bound design
(samples tagged WEIGHT_DESIGN_LAYER: 3x3 convolutions on a 2x2 map, C = F, at two weight sizes around the
last-level cache and two batches).

On the CPU, PyTorch hands oneDNN a plain (F, C, k...) weight, which it reorders into its blocked layout on every
forward and backward-data call; the weight-gradient pass computes a blocked gradient sample by sample and reorders
it back. A call whose weight is large against its arithmetic therefore costs at least

    floor(W, N) = W * a_pass(W)                      fwd, bwd_data
    floor(W, N) = W * a(W) + N * W * b(W)            bwd_weight

for a weight of W bytes and N samples, whatever its FLOPs (2-core VM, one thread: a 124 MB 5x5x5 convolution on a
2x2x2 map, 8 samples, 130 ms forward and 600 ms weight gradient: 0.95 GB/s of weight, against 40 ms and 80 ms
from its FLOPs at the fitted efficiency). From the design, per weight size W_i:

    a_fwd = t_fwd(N=1) / W,   a_bwd_data = t_bwd_data(N=1) / W
    b = (t_bwd_weight(N_max) - t_bwd_weight(N=1)) / ((N_max - 1) W),   a_bwd_weight = t_bwd_weight(N=1) / W - b

with t the fastest median over the compute sweeps (as calibrate.fit.fastest_per_shape keeps); a and b are
interpolated linearly in log W between the sizes and held beyond them. The cost model takes
max(fitted time, floor): on an ordinary convolution the floor is far below its time and changes nothing.

A kernel wider than the map it slides over (7x7 on a 2x2 map) leaves oneDNN's direct kernels for im2col + one GEMM
per sample (calibrate.shapes.onednn_gemm_conv), and every sample's GEMM reads the whole weight:

    floor_im2col(W, N) = W * a'_pass(W) + N * S * W * b'_pass(W)    fwd, bwd_data (those passes only)

where S is the number of GEMMs per sample: 1 in 2-D, the output depth in 3-D, since oneDNN runs one GEMM per
output depth slice (calibrate.shapes.conv_gemm_slices). One thread on the 2-core VM, 64 -> 128 channels, 7x7x7 on
D x 2 x 2 maps (padding 3), batch 8: forward 0.053, 0.097, 0.18, 0.40 ms per sample and weight MB at D = 1, 2, 4, 8.

with a' and b' fitted as a and b above from the design's im2col shapes (7x7 kernels on a 2x2 map at the same
weight targets, batches 1 and 8). 2-core VM, one thread: 0.12 ns per weight byte and sample forward and 0.15-0.18
backward-data at 8.5 and 65 MB, linear in N from 1 to 16; a 310 -> 310 7x7 convolution on a 2x2 map at batch 12
(a random net's) took 26-29 ms forward against 6 ms from the fitted efficiency. A pass with one position per sample
(a 1x1 map: its GEMM is a matrix-vector product, which streams the weight 5x faster, 0.43 ms per sample against
2.1 ms on a 2x2 map for that weight) gets no im2col floor; the fitted efficiency was within 10% there.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Mapping, Optional, Sequence

import numpy as np

from calibrate import shapes
from calibrate.coefficients import ConvWeightFit, Im2colFloor
from calibrate.cost_api import PASSES
from profiler.profile import WEIGHT_DESIGN_LAYER, Sample


def is_weight_design(sample: Sample) -> bool:
    return sample.benchmark in ("conv2d", "conv3d") and (sample.extra or {}).get("layer") == WEIGHT_DESIGN_LAYER


def _im2col_design(sample: Sample) -> bool:
    """A design shape oneDNN runs as im2col + GEMM (its 7x7 kernels on a 2x2 map), told by the rule itself."""
    return shapes.onednn_gemm_conv(sample.benchmark, "fwd", sample.params, sample.dtype, sample.threads or 1)


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
    """The floor's per-byte figures from the weight-design samples among `samples` (None without a complete
    design: every pass at two batches of each weight size). The design's im2col shapes (calibrate.shapes.
    onednn_gemm_conv) give ConvWeightFit.im2col, from their forward and backward-data passes alike."""
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
               "batches 1 and the design's largest (calibrate.conv_weight)"]
    if im2col:
        sources.append(f"measured: im2col 7x7 convolutions on a 2x2 map, weights "
                       f"{', '.join(f'{w / 1e6:.1f} MB' for w in g_sizes)}, forward and backward-data, batches 1 and "
                       "the design's largest (calibrate.conv_weight)")
    return ConvWeightFit(weight_bytes=sizes, s_per_byte=a, per_sample_s_per_byte=b["bwd_weight"], im2col=im2col,
                         sources=sources)


def _at(weight: float, sizes: Sequence[float], values: Sequence[float]) -> float:
    """values interpolated linearly in log(weight) between sizes, held beyond the ends."""
    if weight <= sizes[0] or len(sizes) == 1:
        return float(values[0])
    if weight >= sizes[-1]:
        return float(values[-1])
    return float(np.interp(math.log(weight), [math.log(w) for w in sizes], values))


def floor_s(fit: ConvWeightFit, op: str, pass_: str, params: Mapping[str, int], dtype: str,
            threads: Optional[int] = None) -> float:
    """floor(W, N) of the module docstring for one convolution call (0 for a pass the fit lacks); a call oneDNN
    runs as im2col + GEMM (calibrate.shapes.onednn_gemm_conv on a host with `threads`) takes the larger of it and
    the im2col floor."""
    weight = shapes.conv_weight_bytes(op, params, dtype)
    time_s = 0.0
    if pass_ in fit.s_per_byte:
        time_s = weight * _at(weight, fit.weight_bytes, fit.s_per_byte[pass_])
        if pass_ == "bwd_weight":
            time_s += int(params["N"]) * weight * _at(weight, fit.weight_bytes, fit.per_sample_s_per_byte)
    g = fit.im2col
    if g is not None and pass_ in g.s_per_byte and shapes.onednn_gemm_conv(op, pass_, params, dtype, threads) \
            and shapes.conv_output_positions(op, params) > 1:
        gemms = int(params["N"]) * shapes.conv_gemm_slices(op, params)
        time_s = max(time_s, weight * (_at(weight, g.weight_bytes, g.s_per_byte[pass_])
                                       + gemms * _at(weight, g.weight_bytes, g.per_sample_s_per_byte[pass_])))
    return time_s
