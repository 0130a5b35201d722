"""Fit the GPU kernel model's constants (calibrate.gpu_kernels.PARAMS) to measured kernel times of one GPU and dtype.

All GEMM and convolution samples of a math mode are fitted together: the per-SM efficiency, feed bandwidth, DRAM
efficiency, floors and wave time are properties of the GPU, shared by cuBLAS and cuDNN; the families differ by
one efficiency ratio each and the convolution algorithms by one relative efficiency per pass. The loss is the
robust (soft L1, scale 0.15) least squares of log(predicted / measured) plus a Gaussian prior on each log constant
(PARAMS), weighted as PRIOR_WEIGHT measured rows, so that a family with few samples (or none) falls back to
physically plausible values instead of running away (docs/decisions/2026-12-06-gpu-kernel-model.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from calibrate import gpu_kernels as gk

#: the prior's weight, in measured rows (docs/decisions/2026-12-06-gpu-kernel-model.md)
PRIOR_WEIGHT = 9.0
LOSS_SCALE = 0.15
MAX_EVALUATIONS = 400
NAMES = tuple(gk.PARAMS)


@dataclass(frozen=True)
class KernelSample:
    """One measured call: op ("gemm" | "conv2d"), pass, params (cost-model shape), dtype and seconds."""

    op: str
    pass_: str
    params: Mapping
    dtype: str
    time_s: float
    group: str = ""  # the application the shape comes from (held out together)


class _Arrays:
    """Every candidate of every sample, flattened (rows of gk.candidates with the sample's index)."""

    def __init__(self, samples: Sequence[KernelSample], hardware: gk.Hardware, search: bool):
        rows, starts = [], []
        self.time_s = np.array([s.time_s for s in samples], float)
        self.is_gemm = np.array([s.op == "gemm" for s in samples])
        self.pass_index = np.array([gk.PASSES.index(s.pass_) for s in samples])
        self.unaligned = np.array([gk.unaligned(s.op, s.params, hardware.tensor_cores) for s in samples])
        self.transposed = np.array([gk.transposed(s.op, s.params) for s in samples])
        self.operand_bytes = np.array([gk.operand_bytes(s.op, s.params, s.dtype) for s in samples])
        for i, s in enumerate(samples):
            starts.append(sum(len(r) for r in rows))
            cands = gk.candidates(s.op, s.pass_, s.params, s.dtype, hardware.sms, hardware.tensor_cores, search)
            rows.append(np.array([c + (i,) for c in cands], float))
        table = np.vstack(rows)
        self.starts = np.array(starts)
        self.algorithm, self.waves, self.flops, self.intensity, self.partials = (table[:, j] for j in range(5))
        self.sample = table[:, 5].astype(int)
        self.hardware = hardware


def predict_arrays(values: Mapping[str, float], a: _Arrays) -> np.ndarray:
    """gk.kernel_time_s of every sample, vectorised over candidates."""
    hw = a.hardware
    sm_peak = np.where(a.unaligned, values["unaligned_ratio"] * hw.fallback_flops_per_s,
                       hw.peak_flops_per_s)[a.sample] / hw.sms
    times = np.empty_like(a.flops)
    gemm = a.is_gemm[a.sample]
    passes = a.pass_index[a.sample]
    for is_gemm, index in ((True, 0), (False, 0), (False, 1), (False, 2)):
        mask = (gemm == is_gemm) & (passes == index)
        if mask.any():
            times[mask] = gk.candidate_time(values, sm_peak[mask], a.algorithm[mask], a.waves[mask], a.flops[mask],
                                            a.intensity[mask], a.partials[mask], gk.PASSES[index], is_gemm,
                                            hw.memory_bytes_per_s)
    compute = np.minimum.reduceat(times, a.starts)
    memory = (a.operand_bytes / (values["memory_efficiency"] * hw.memory_bytes_per_s)
              * np.where(a.transposed, values["transposed_memory_ratio"], 1.0))
    floor = np.where(a.is_gemm, values["floor_gemm_s"], values["floor_conv_s"])
    return np.maximum(floor, np.maximum(compute, memory))


def _values(theta: np.ndarray) -> dict[str, float]:
    return dict(zip(NAMES, np.exp(theta).tolist()))


def fit(samples: Sequence[KernelSample], hardware: gk.Hardware, search: bool = True,
        start: Optional[Mapping[str, float]] = None) -> dict[str, float]:
    """The constants (gk.PARAMS names -> values) that fit these samples of one GPU and math mode best."""
    from scipy.optimize import least_squares

    if not samples:
        raise ValueError("fit: no samples")
    arrays = _Arrays(samples, hardware, search)
    prior = np.log([gk.PARAMS[n].prior for n in NAMES])
    sigma = np.array([gk.PARAMS[n].sigma for n in NAMES])
    measured = np.log(arrays.time_s)
    weight = math.sqrt(PRIOR_WEIGHT / len(samples))

    def residuals(theta):
        predicted = np.log(predict_arrays(_values(theta), arrays))
        return np.concatenate([predicted - measured, weight * (theta - prior) / sigma])

    theta0 = prior if start is None else np.log([start[n] for n in NAMES])
    result = least_squares(residuals, theta0, loss="soft_l1", f_scale=LOSS_SCALE, diff_step=1e-3,
                           max_nfev=MAX_EVALUATIONS)
    return _values(result.x)


def predict(values: Mapping[str, float], samples: Sequence[KernelSample], hardware: gk.Hardware,
            search: bool = True) -> np.ndarray:
    return predict_arrays(values, _Arrays(samples, hardware, search))


def leave_one_group_out(samples: Sequence[KernelSample], hardware: gk.Hardware, search: bool = True
                        ) -> np.ndarray:
    """Each sample predicted by a fit to the samples of every other group (application)."""
    out = np.empty(len(samples))
    everything = fit(samples, hardware, search)
    for group in sorted({s.group for s in samples}):
        held = [i for i, s in enumerate(samples) if s.group == group]
        kept = [s for s in samples if s.group != group]
        values = fit(kept, hardware, search, start=everything) if kept else everything
        out[held] = predict(values, [samples[i] for i in held], hardware, search)
    return out


def accuracy(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """1 - |predicted - measured| / measured, per row (the project's accuracy)."""
    return 1.0 - np.abs(predicted - measured) / measured
