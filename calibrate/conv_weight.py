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
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Mapping, Optional, Sequence

import numpy as np

from calibrate import shapes
from calibrate.coefficients import ConvWeightFit
from calibrate.cost_api import PASSES
from profiler.profile import WEIGHT_DESIGN_LAYER, Sample


def is_weight_design(sample: Sample) -> bool:
    return sample.benchmark in ("conv2d", "conv3d") and (sample.extra or {}).get("layer") == WEIGHT_DESIGN_LAYER


def fit_conv_weight(samples: Sequence[Sample]) -> Optional[ConvWeightFit]:
    """The floor's per-byte figures from the weight-design samples among `samples` (None without a complete
    design: every pass at two batches of each weight size)."""
    best: dict[tuple[str, float, int], float] = {}
    batches: dict[float, set[int]] = defaultdict(set)
    for s in samples:
        if not is_weight_design(s) or s.variant not in PASSES:
            continue
        weight, n = shapes.conv_weight_bytes(s.benchmark, s.params, s.dtype), int(s.params["N"])
        best[s.variant, weight, n] = min(best.get((s.variant, weight, n), math.inf), float(np.median(s.times_s)))
        batches[weight].add(n)
    sizes, a, b = [], {p: [] for p in PASSES}, []
    for weight in sorted(batches):
        ns = sorted(batches[weight])
        lo, hi = ns[0], ns[-1]
        if lo != 1 or hi == lo or any((p, weight, n) not in best for p in PASSES for n in (lo, hi)):
            continue
        slope = max(0.0, (best["bwd_weight", weight, hi] - best["bwd_weight", weight, lo]) / ((hi - lo) * weight))
        sizes.append(weight)
        b.append(slope)
        a["fwd"].append(best["fwd", weight, 1] / weight)
        a["bwd_data"].append(best["bwd_data", weight, 1] / weight)
        a["bwd_weight"].append(max(0.0, best["bwd_weight", weight, 1] / weight - slope))
    if not sizes:
        return None
    mb = ", ".join(f"{w / 1e6:.1f} MB" for w in sizes)
    return ConvWeightFit(weight_bytes=sizes, s_per_byte=a, per_sample_s_per_byte=b,
                         sources=[f"measured: weight-bound 3x3 convolutions on a 2x2 map, weights {mb}, "
                                  "batches 1 and the design's largest (calibrate.conv_weight)"])


def _at(weight: float, sizes: Sequence[float], values: Sequence[float]) -> float:
    """values interpolated linearly in log(weight) between sizes, held beyond the ends."""
    if weight <= sizes[0] or len(sizes) == 1:
        return float(values[0])
    if weight >= sizes[-1]:
        return float(values[-1])
    return float(np.interp(math.log(weight), [math.log(w) for w in sizes], values))


def floor_s(fit: ConvWeightFit, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> float:
    """floor(W, N) of the module docstring for one convolution call (0 for a pass the fit lacks)."""
    if pass_ not in fit.s_per_byte:
        return 0.0
    weight = shapes.conv_weight_bytes(op, params, dtype)
    time_s = weight * _at(weight, fit.weight_bytes, fit.s_per_byte[pass_])
    if pass_ == "bwd_weight":
        time_s += int(params["N"]) * weight * _at(weight, fit.weight_bytes, fit.per_sample_s_per_byte)
    return time_s
