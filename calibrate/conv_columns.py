"""A floor on a CPU 3-D weight gradient that oneDNN computes as im2col + GEMM (calibrate.shapes.
onednn_gemm_weight_grad: 4-15 input channels with padding, or a map thinner in depth than its first window).

That implementation fills, per sample and output depth slice, a column buffer of C * prod(kernel) * (output
positions of the slice) elements and multiplies it into the weight gradient (oneDNN's cpu/gemm_convolution.cpp),
so its time grows with the buffer, N * C * prod(kernel) * output positions elements, whatever the FLOPs:

    floor_s = columns * s_per_column

with s_per_column a low quantile (COLUMN_QUANTILE) of time / columns over the calibration's compute samples in that
regime (the fixed costs of small calls raise the others' ratio). 2-core VM, one thread: 0.47-0.61 ns per column
element over the large 3x3x3 grid points; a random net's 4 -> 4 5x5x5 convolution on 16^3 at batch 236 (483 M
elements) took 239 ms, where the efficiency fit, which has no 5x5x5 point in the regime, gave 18 ms. The cost
model takes max(fitted time, floor).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from calibrate import shapes
from calibrate.coefficients import ColumnFloor
from profiler.profile import Sample

#: the quantile of time / columns over the regime's samples kept as the floor's rate
COLUMN_QUANTILE = 10.0


def fit_conv_columns(samples: Sequence[Sample]) -> Optional[ColumnFloor]:
    """s_per_column of the module docstring from the compute samples in the regime (None without any)."""
    rates = [float(np.mean(s.times_s)) / shapes.im2col_columns(s.benchmark, s.params) for s in samples
             if s.benchmark == "conv3d" and s.variant == "bwd_weight"
             and shapes.onednn_gemm_weight_grad(s.benchmark, s.variant, s.params, s.dtype, s.threads or 1)]
    if not rates:
        return None
    return ColumnFloor(s_per_column=float(np.percentile(rates, COLUMN_QUANTILE)), samples=len(rates),
                       sources=[f"measured: {len(rates)} 3-D weight-gradient samples oneDNN ran as im2col + GEMM, "
                                f"{COLUMN_QUANTILE:.0f}th percentile of time per column element "
                                "(calibrate.conv_columns)"])


def floor_s(fit: Optional[ColumnFloor], op: str, pass_: str, params: Mapping[str, int], dtype: str,
            threads: Optional[int]) -> float:
    """floor_s of the module docstring for one call (0 without a fit or outside the regime)."""
    if fit is None or not shapes.onednn_gemm_weight_grad(op, pass_, params, dtype, threads):
        return 0.0
    return shapes.im2col_columns(op, params) * fit.s_per_column
