"""Fit the GPU kernel model's constants (calibrate.gpu_kernels.PARAMS) to measured kernel times of one GPU and dtype.

All GEMM and convolution samples of a math mode are fitted together: the per-SM efficiency, feed bandwidth, DRAM
efficiency, floors and wave time are properties of the GPU, shared by cuBLAS and cuDNN; the families differ by
one efficiency ratio each and the convolution algorithms by one relative efficiency per pass. The loss is the
robust (soft L1, scale 0.15) least squares of log(predicted / measured) plus a prior on each log constant (PARAMS:
centre and spread; its residual goes through the same robust loss), weighted as PRIOR_WEIGHT measured rows, so
that a family with few samples (or none) falls back to physically plausible values instead of running away
(docs/decisions/2026-12-06-gpu-kernel-model.md).
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
#: starting points, as factors on the prior (or given start): the main loop's efficiency and feed low and high
STARTS = ({}, {"efficiency": 0.7, "feed_bytes_per_s": 0.6}, {"efficiency": 1.25, "feed_bytes_per_s": 2.0})


@dataclass(frozen=True)
class KernelSample:
    """One measured call: op ("gemm" | "conv2d" | "conv3d"), pass, params (cost-model shape), dtype and seconds."""

    op: str
    pass_: str
    params: Mapping
    dtype: str
    time_s: float
    group: str = ""  # the application the shape comes from (held out together)
    #: the call's peak over the fit's Hardware peak (a pseudo-FP16 GEMM beside true-half convolutions:
    #: calibrate.gpu_specs.split_math)
    peak_scale: float = 1.0


class _Arrays:
    """Every candidate of every sample, flattened (rows of gk.candidates with the sample's index)."""

    def __init__(self, samples: Sequence[KernelSample], hardware: gk.Hardware, search: bool):
        rows, starts = [], []
        self.time_s = np.array([s.time_s for s in samples], float)
        self.is_gemm = np.array([s.op == "gemm" for s in samples])
        self.pass_index = np.array([gk.PASSES.index(s.pass_) for s in samples])
        self.padded = np.array([gk.padded_on_tensor_cores(s.op, s.params, hardware.tensor_cores) for s in samples])
        self.peak_scale = np.array([s.peak_scale for s in samples], float)
        self.transposed = np.array([gk.transposed(s.op, s.params) for s in samples])
        self.strided = np.array([gk.strided_backward_data(s.op, s.pass_, s.params) for s in samples])
        self.gapped = np.array([gk.gapped_backward_data(s.op, s.pass_, s.params) for s in samples])
        self.operand_bytes = np.array([gk.operand_bytes(s.op, s.params, s.dtype) for s in samples])
        offset = 0
        for i, s in enumerate(samples):
            cands = gk.candidates(s.op, s.pass_, s.params, s.dtype, hardware.sms, hardware.tensor_cores, search)
            rows.append(np.array([c + (i,) for c in cands], float))
            starts.append(offset)
            offset += len(cands)
        table = np.vstack(rows)
        self.starts = np.array(starts)
        self.algorithm, self.waves, self.flops, self.intensity, self.partials, self.reductions = (
            table[:, j] for j in range(6))
        self.sample = table[:, 6].astype(int)
        self.hardware = hardware


def predict_arrays(values: Mapping[str, float], a: _Arrays) -> np.ndarray:
    """gk.kernel_time_s of every sample, vectorised over candidates."""
    hw = a.hardware
    padded_share = np.where(a.pass_index == 0, values["unaligned_ratio"], values["unaligned_bwd_ratio"])
    sm_peak = (np.where(a.padded, padded_share, 1.0) * a.peak_scale)[a.sample] * hw.peak_flops_per_s / hw.sms
    times = np.empty_like(a.flops)
    gemm = a.is_gemm[a.sample]
    passes = a.pass_index[a.sample]
    for is_gemm, index in ((True, 0), (False, 0), (False, 1), (False, 2)):
        mask = (gemm == is_gemm) & (passes == index)
        if mask.any():
            times[mask] = gk.candidate_time(values, sm_peak[mask], a.algorithm[mask], a.waves[mask], a.flops[mask],
                                            a.intensity[mask], a.partials[mask], gk.PASSES[index], is_gemm,
                                            hw.memory_bytes_per_s, a.reductions[mask])
    compute = np.minimum.reduceat(times, a.starts) / np.where(
        a.gapped, values["gapped_bwd_data_ratio"], np.where(a.strided, values["strided_bwd_data_ratio"], 1.0))
    memory = (a.operand_bytes / (values["memory_efficiency"] * hw.memory_bytes_per_s)
              * np.where(a.transposed, values["transposed_memory_ratio"], 1.0))
    floor = values["floor_s"] * np.where(a.is_gemm, 1.0, values["conv_floor_ratio"])
    return np.where(a.is_gemm, 0.0, values["conv_overhead_s"]) + np.maximum(floor, np.maximum(compute, memory))


def fit(samples: Sequence[KernelSample], hardware: gk.Hardware, search: bool = True,
        start: Optional[Mapping[str, float]] = None, centres: Optional[Mapping[str, float]] = None) -> dict[str, float]:
    """The constants (gk.PARAMS names -> values) that fit these samples of one GPU and math mode best; `centres`
    moves some priors' centres (their spreads kept)."""
    from scipy.optimize import least_squares

    if not samples:
        raise ValueError("fit: no samples")
    arrays = _Arrays(samples, hardware, search)
    # constants no sample informs stay at their prior, out of the search (each one costs finite differences)
    centre = {**{n: gk.PARAMS[n].prior for n in NAMES}, **(centres or {})}
    fixed = {n: centre[n] for n in uninformed(arrays)}
    free = [n for n in NAMES if n not in fixed]
    prior = np.log([centre[n] for n in free])
    sigma = np.array([gk.PARAMS[n].sigma for n in free])
    measured = np.log(arrays.time_s)
    weight = math.sqrt(PRIOR_WEIGHT / len(samples))

    def values_of(theta):
        return {**fixed, **dict(zip(free, np.exp(theta).tolist()))}

    def residuals(theta):
        predicted = np.log(predict_arrays(values_of(theta), arrays))
        return np.concatenate([predicted - measured, weight * (theta - prior) / sigma])

    initial = dict(centre)
    initial.update(_data_start(arrays) if start is None else start)
    best = None
    for shift in STARTS:  # the loss has corners (a min over tiles, a max with the floors): several starts
        theta0 = np.log([initial[n] * shift.get(n, 1.0) for n in free])
        result = least_squares(residuals, theta0, loss="soft_l1", f_scale=LOSS_SCALE, diff_step=1e-3,
                               max_nfev=MAX_EVALUATIONS)
        if best is None or result.cost < best.cost:
            best = result
    values = values_of(best.x)
    return {n: values[n] for n in NAMES}


def uninformed(a: _Arrays) -> tuple[str, ...]:
    """The channel-padding shares where no sample of their passes is a padded call (a CUDA-core mode has none), and
    the 3-D regime's ratios where no sample of their pass is a 3-D convolution (DeepBench times none)."""
    three = gk.ALGORITHMS.index("implicit_gemm_3d")
    out = [f"conv3d_{pass_}" for i, pass_ in enumerate(gk.PASSES)
           if not ((a.algorithm == three) & (a.pass_index[a.sample] == i)).any()]
    if not (a.padded & (a.pass_index == 0)).any():
        out.append("unaligned_ratio")
    if not (a.padded & (a.pass_index > 0)).any():
        out.append("unaligned_bwd_ratio")
    return tuple(out)


def _data_start(a: _Arrays) -> dict[str, float]:
    """Starting floors read off the data (the shortest calls): a floor below every prediction has no gradient,
    so a start at the prior's 6 us would never rise to a GPU whose calls take 70 us at least (M40)."""
    gemm, conv = a.time_s[a.is_gemm], a.time_s[~a.is_gemm]
    floor = 0.9 * float(gemm.min() if len(gemm) else conv.min() / gk.PARAMS["conv_floor_ratio"].prior)
    ratio = float(np.clip(0.9 * conv.min() / floor, 0.5, 4.0)) if len(conv) else gk.PARAMS["conv_floor_ratio"].prior
    return {"floor_s": floor, "conv_floor_ratio": ratio}


def predict(values: Mapping[str, float], samples: Sequence[KernelSample], hardware: gk.Hardware,
            search: bool = True) -> np.ndarray:
    return predict_arrays(values, _Arrays(samples, hardware, search))


def leave_one_group_out(samples: Sequence[KernelSample], hardware: gk.Hardware, search: bool = True,
                        centres: Optional[Mapping[str, float]] = None) -> np.ndarray:
    """Each sample predicted by a fit to the samples of every other group (application); NaN where no other
    group exists."""
    out = np.full(len(samples), np.nan)
    for group in sorted({s.group for s in samples}):
        held = [i for i, s in enumerate(samples) if s.group == group]
        kept = [s for s in samples if s.group != group]
        if kept:  # each fold starts from the prior and its own data: nothing of the held-out rows leaks in
            out[held] = predict(fit(kept, hardware, search, centres=centres), [samples[i] for i in held], hardware,
                                search)
    return out


def accuracy(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """1 - |predicted - measured| / measured, per row (the project's accuracy)."""
    return 1.0 - np.abs(predicted - measured) / measured


def with_math(spec, dtype: str, rows: Sequence[tuple[KernelSample, Optional[str]]], sms: Optional[int] = None):
    """(the dtype's Hardware, its samples each with the peak_scale of its own math, the GEMMs' and the convolutions'
    scale: the larger set's of each op) from (sample, math) pairs of one GPU and dtype (gpu_specs.split_math)."""
    import dataclasses
    from collections import Counter

    from calibrate import gpu_specs

    hardware = gpu_specs.split_math(spec, dtype, rows[0][1], sms)[0]
    out, votes = [], {"gemm": Counter(), "conv": Counter()}
    for sample, math_name in rows:
        scale = gpu_specs.split_math(spec, dtype, math_name, sms)[1]
        out.append(dataclasses.replace(sample, peak_scale=scale) if scale != 1.0 else sample)
        votes["gemm" if sample.op == "gemm" else "conv"][scale] += 1
    pick = lambda c: c.most_common(1)[0][0] if c else 1.0  # noqa: E731
    return hardware, out, pick(votes["gemm"]), pick(votes["conv"])


def kernel_samples(samples: Sequence) -> dict[tuple[str, Optional[str]], list[KernelSample]]:
    """(dtype, math mode) -> the profile Samples the kernel model covers (GEMM and linear passes as the forward
    GEMMs they run, ungrouped undilated 2-D and 3-D convolutions: gk.as_kernel_call), as KernelSamples labelled by
    their application (extra["application"]; for a layer of the GPU grid, its network: the first word of
    extra["layer"], as in "resnet_res2_3x3"; "" when unnamed)."""
    out: dict[tuple[str, Optional[str]], list[KernelSample]] = {}
    for s in samples:
        call = gk.as_kernel_call(s.benchmark, s.variant, s.params)
        if call is None or int(s.params.get("groups", 1)) > 1:  # the fit's rows: GEMMs and dense convolutions
            continue
        group = s.extra.get("application") or str(s.extra.get("layer") or "").split("_")[0]
        sample = KernelSample(*call, s.dtype, float(np.median(s.times_s)), str(group or ""))
        out.setdefault((s.dtype, s.extra.get("math")), []).append(sample)
    return out


def fit_gpu_kernels(samples: Sequence, gpu_name: str, sms: Optional[int] = None, search: bool = True,
                    tensor_core_centres: Optional[Mapping[str, float]] = None, device=None):
    """The GpuKernels record of a GPU profile's samples (None when no sample is a GEMM or convolution, or the GPU
    is neither in calibrate/data/gpus.yaml nor described by `device`, its profiler.profile.GPUInfo: gpu_specs.
    derive_spec): one fit per dtype, and its held-out median accuracy per family where the samples name two
    applications or more; `tensor_core_centres` moves priors of the tensor-core modes' fits."""
    from calibrate import gpu_specs
    from calibrate.coefficients import GpuKernelMode, GpuKernels

    spec = gpu_specs.spec_for(gpu_name, device)
    groups = kernel_samples(samples)
    if spec is None or not groups:
        return None
    modes = {}
    # one mode per dtype: where samples of one dtype ran in two math modes on different Hardware, the larger set's;
    # modes on the same Hardware (true half beside FP32 arithmetic: gpu_specs.split_math) fit together
    chosen: dict[str, list] = {}
    for (dtype, math_name), rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        if dtype not in chosen:
            chosen[dtype] = [math_name]
        elif gpu_specs.split_math(spec, dtype, math_name, sms)[0] == \
                gpu_specs.split_math(spec, dtype, chosen[dtype][0], sms)[0]:
            chosen[dtype].append(math_name)
    for dtype, maths in sorted(chosen.items()):
        math_name = maths[0]
        hardware, rows, gemm_scale, conv_scale = with_math(
            spec, dtype, [(r, m) for m in maths for r in groups[(dtype, m)]], sms)
        centres = tensor_core_centres if hardware.tensor_cores else None
        values = fit(rows, hardware, search, centres=centres)
        quality = None
        if len({r.group for r in rows}) >= 2:
            held = leave_one_group_out(rows, hardware, search, centres)
            measured = np.array([r.time_s for r in rows])
            quality = {}
            for fam in gk.FAMILIES:
                mask = np.array([gk.family(r.op, r.pass_) == fam for r in rows]) & np.isfinite(held)
                if mask.any():
                    quality[fam] = float(np.median(accuracy(held[mask], measured[mask])))
        mode, tensor_cores = gpu_specs.math_mode(spec, dtype, math_name)
        modes[dtype] = GpuKernelMode(math=math_name or mode, tensor_cores=tensor_cores,
                                     peak_flops_per_s=hardware.peak_flops_per_s,
                                     fallback_flops_per_s=hardware.fallback_flops_per_s, values=values,
                                     gemm_peak_scale=gemm_scale, conv_peak_scale=conv_scale,
                                     samples=len(rows), held_out_median_accuracy=quality)
    return GpuKernels(gpu=spec.name, sms=int(sms or spec.sms), memory_bytes_per_s=spec.memory_bytes_per_s,
                      search=search, modes=modes,
                      sources=[spec.source, f"constants fitted to {sum(m.samples for m in modes.values())} measured "
                                            "kernel times (calibrate.gpu_kernel_fit)"])

