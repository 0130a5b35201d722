"""The GPU backend: what a GPU adds to the generic compute path (calibrate.shapes, calibrate.compute).

The efficiency fits take the generic features (calibrate.shapes.FLOP_FEATURES, BYTE_FEATURES) and nothing of the
host's; a float32 3x3 stride-1 convolution is costed with a published GPU's Winograd family where the profile has
one; and a GEMM, linear or 2-D or 3-D convolution with the GPU kernel model where the profile has one for its op
and dtype (calibrate.gpu_kernels: waves, tiles, tensor cores, cuDNN's algorithms; docs/method.md §3b), except a
grouped convolution where the profile has a grouped family for it.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from calibrate import gpu_kernels, shapes
from calibrate.coefficients import Coefficients
from calibrate.gpu_kernel_fit import fit_gpu_kernels
from profiler.dtypes import canonical_dtype

#: the profile family a GPU float32 3x3 stride-1 convolution is costed with where the profile has it
#: (calibrate.published: a published GPU's cuDNN Winograd kernels; winograd_eligible)
WINOGRAD_FAMILY = "conv2d_winograd"


def winograd_eligible(op: str, params: Mapping[str, Any], dtype: str) -> bool:
    """Whether cuDNN can run this convolution with its Winograd kernels: 2-D, 3x3, stride 1, not dilated, not
    grouped, float32 (Lavin and Gray 2016, "Fast Algorithms for Convolutional Neural Networks": minimal
    filtering over 2x2 output tiles, F(2x2, 3x3)). Tensor-core (fp16, bf16, TF32) convolutions run as implicit
    GEMMs instead."""
    if op != "conv2d" or canonical_dtype(dtype) != "float32" or int(params.get("groups", 1)) != 1:
        return False
    return (shapes.per_dim(params, "kernel", 2, 1) == [3, 3] and shapes.per_dim(params, "stride", 2, 1) == [1, 1]
            and shapes.per_dim(params, "dilation", 2, 1) == [1, 1])


class GpuBackend:
    """calibrate.backends.Backend of calls on a GPU."""

    device_is_host = False
    own_features = frozenset()

    def for_sample(self, sample) -> "GpuBackend":
        return self

    def feature_names(self, op: str) -> list[str]:
        return shapes.feature_names(op)

    def work(self, op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> dict[str, Any]:
        return shapes.work(op, pass_, params, dtype)

    def curve_point(self, sample, op: str, pass_: str, dtype: str) -> bool:
        return True

    def family_candidates(self, op: str, params: Mapping[str, Any], dtype: str) -> tuple[str, ...]:
        """Families tried before the op's own where the profile has them: the Winograd family."""
        return (WINOGRAD_FAMILY,) if winograd_eligible(op, params, dtype) else ()

    def floor_s(self, coefficients: Coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> float:
        return 0.0

    def first_touch_s(self, coefficients: Coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                      fit=None, fitted_as=None) -> float:
        return 0.0

    def kernel_time_s(self, coefficients: Coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                      search: bool, cache: dict) -> Optional[float]:
        """The GPU kernel model's time of a GEMM, linear or convolution call (calibrate.gpu_kernels), where the
        profile has one for this op and dtype; None otherwise (the family fits cost it). A grouped convolution goes
        to the profile's grouped family where it has one for the pass and dtype: the kernel model is fitted to GEMMs
        and dense convolutions only (calibrate.gpu_kernel_fit.kernel_samples). search: whether convolutions run
        cuDNN's fastest algorithm or its heuristic's; cache: times by call, kept by the caller."""
        model = coefficients.gpu_kernels
        if model is None or (model.ops is not None and op not in model.ops):
            return None
        family = shapes.family_op(op, params)
        if family != op and f"{family}/{pass_}/{dtype}" in coefficients.compute:
            return None
        call = gpu_kernels.as_kernel_call(op, pass_, params)
        mode = model.modes.get(dtype) or (model.modes.get("float32") if dtype == "tf32" else None)
        if call is None or mode is None:
            return None
        kernel_op, kernel_pass, kernel_params = call
        key = (kernel_op, kernel_pass, shapes.shape_key(kernel_params), dtype, search)
        time_s = cache.get(key)
        if time_s is None:
            peak = mode.peak_flops_per_s * (mode.gemm_peak_scale if kernel_op == "gemm" else mode.conv_peak_scale)
            hardware = gpu_kernels.Hardware(model.sms, peak, mode.fallback_flops_per_s, model.memory_bytes_per_s,
                                            mode.tensor_cores)
            time_s = gpu_kernels.kernel_time_s(mode.values, hardware, kernel_op, kernel_pass, kernel_params, dtype,
                                               search)
            cache[key] = time_s
        return time_s

    def errors_by_kernel(self, feature_names, points, preds, truth):
        return None

    def fit_fields(self, by_kind: Mapping[str, list], machine) -> dict[str, Any]:
        """The GPU kernel model fitted from the compute samples, on a machine that records its GPUs (a GPU the
        datasheet file lacks by the figures its record derives: gpu_specs.derive_spec; its tensor-core fits'
        padded-channel priors centred on DeepBench's V100 measurement: calibrate.measured_kernels.PADDING_PRIOR)."""
        if machine is None or not machine.gpus:
            return {}
        from calibrate.measured_kernels import padding_centres  # the tensor-core fits' padded-share priors

        fields: dict[str, Any] = {"gpu_kernels": fit_gpu_kernels(
            by_kind.get("compute", []), machine.gpus[0].name, machine.gpus[0].sms, tensor_core_centres=padding_centres(),
            device=machine.gpus[0])}
        if by_kind.get("framework"):  # the host's time per layer pass: the floor a GPU layer pass takes (method.md §3d)
            from calibrate.framework import fit_host_dispatch

            fields["host_dispatch"] = fit_host_dispatch(by_kind["framework"], np.random.default_rng(0))
        return fields

    def report_lines(self, c: Coefficients, rate) -> list[str]:
        return []
