"""The host backend: PyTorch's CPU convolutions and oneDNN, as the generic compute path (calibrate.shapes,
calibrate.compute) sees them.

Which kernel PyTorch and oneDNN run for a call (native, direct or im2col + GEMM), the work that kernel executes
(SIMD-padded channels, the padding's taps skipped), two regime features for the efficiency fits, the time floors
of the calls those fits cannot follow, the blocked copies oneDNN allocates and the first touch of fresh host
tensors. Each rule was read off PyTorch's or oneDNN's source and checked against what they run
(tests/calibrate/test_fit_shapes.py); the method is docs/method.md §3, the measurements behind each rule are in
docs/calibration.md ("Host backend") and the decision records named there.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from calibrate import shapes
from calibrate.alphabeta import relative_errors
from calibrate.coefficients import Coefficients, ColumnFloor, ComputeFit, ConvWeightFit, FirstTouchFit
from calibrate.shapes import canonical_dtype, int_param, per_dim, spatial_sizes
from profiler.dtypes import DTYPE_BYTES
from profiler.opmath import window_output_size
from profiler.profile import WEIGHT_DESIGN_LAYER, Sample

#: the host's own efficiency features, appended to the generic ones of a GEMM or convolution (calibrate.shapes):
#: whether PyTorch runs the call with its native kernels (cpu_native_conv), and log10 of the im2col buffer such
#: a kernel, or oneDNN's 3-D weight-gradient fallback (onednn_gemm_weight_grad), fills (0 for every other call)
OWN_FEATURES = ("cpu_native_conv", "log_native_columns")
FLOP_FEATURES = shapes.FLOP_FEATURES + list(OWN_FEATURES)
#: both are free in the monotone trees (calibrate.shapes.MONOTONE)
MONOTONE = {name: 0 for name in OWN_FEATURES}
CONV_OPS = ("conv2d", "conv3d")
#: PyTorch's CPU float32 convolution leaves oneDNN for its own kernels below this N*C*size(2)*size(3)
NATIVE_CONV_MAX_ELEMENTS = 20480
#: float32 lanes of the vector ISA PyTorch's CPU kernels dispatch to (torch.backends.cpu.get_cpu_capability(),
#: recorded as Machine.cpu_capability): the channel block of oneDNN's blocked layouts (nChw16c on AVX-512,
#: nChw8c on AVX2). Other ISAs get no padding.
SIMD_FP32_LANES = {"AVX512": 16, "AVX2": 8}


def simd_lanes(cpu_capability: Optional[str]) -> Optional[int]:
    """The float32 lanes of a recorded CPU capability; None (no padding) when unknown or unrecorded."""
    return SIMD_FP32_LANES.get(cpu_capability or "")


# ----------------------------------------------------------------------------------------- which kernel runs
def cpu_native_conv(op: str, params: Mapping[str, Any], dtype: str, threads: int) -> bool:
    """Whether PyTorch runs this CPU convolution with its native kernels (thnn_conv2d, slow_conv3d) instead of
    oneDNN: the float32 rule of `use_mkldnn` in aten/src/ATen/native/ConvUtils.h. The native kernels run up to
    9x slower per FLOP, a regime no smooth efficiency curve follows, so the fit gets it as a feature
    (docs/decisions/2026-11-29-cpu-native-convolutions.md)."""
    if op not in CONV_OPS or canonical_dtype(dtype) != "float32":
        return False
    dims = 3 if op == "conv3d" else 2
    n, c = int_param(params, "N", op), int_param(params, "C", op)
    spatial = spatial_sizes(params, op, dims)
    kernel = per_dim(params, "kernel", dims, 1)
    strided = any(v != 1 for v in per_dim(params, "stride", dims, 1))
    dilated = any(v != 1 for v in per_dim(params, "dilation", dims, 1))
    one_by_one = kernel[-1] == 1 and kernel[-2] == 1
    if not (strided or dilated or n >= 16 or not one_by_one or threads > 1):
        return True
    groups = int(params.get("groups", 1))
    big_kernel = kernel[-1] > 3 and kernel[-2] > 3
    return not (groups > 1 or big_kernel or n > 1 or n * c * spatial[0] * spatial[1] > NATIVE_CONV_MAX_ELEMENTS)


def onednn_gemm_conv(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int]) -> bool:
    """Whether oneDNN runs this CPU float32 convolution pass as im2col + one GEMM per sample (`gemm:jit`) instead
    of its direct JIT kernel: the forward kernel refuses a left padding wider than the output columns it unrolls
    (`jcp.l_pad > jcp.ur_w` in jit_avx512_common_conv_kernel.cpp), so a kernel wider than its map falls back;
    backward-data does so at stride 1 over the input width. The weight-gradient pass keeps its direct kernel in
    2-D (3-D: onednn_gemm_weight_grad). Costed by the weight floor (weight_floor_s), not the efficiency curve
    (docs/decisions/2026-12-02-im2col-floor.md)."""
    if threads is None or op not in CONV_OPS or canonical_dtype(dtype) != "float32":
        return False
    if pass_ not in ("fwd", "bwd_data") or int(params.get("groups", 1)) != 1 or cpu_native_conv(op, params, dtype, threads):
        return False
    dims = 3 if op == "conv3d" else 2
    if any(v != 1 for v in per_dim(params, "dilation", dims, 1)):
        return False
    width = spatial_sizes(params, op, dims)[-1]
    kernel, stride = per_dim(params, "kernel", dims, 1)[-1], per_dim(params, "stride", dims, 1)[-1]
    left_pad = per_dim(params, "padding", dims, 0)[-1]
    if pass_ == "bwd_data":
        return stride == 1 and left_pad > width
    return left_pad > window_output_size(width, kernel, stride, left_pad)


def onednn_gemm_weight_grad(op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                            threads: Optional[int]) -> bool:
    """Whether oneDNN computes this CPU float32 3-D weight gradient as im2col + GEMM (one GEMM per sample and
    output depth slice) instead of its direct kernel: with padding, when the input has 4-15 channels or is so thin
    in depth that the first window reaches past it (D <= kernel depth - front padding). Read off oneDNN's verbose
    log over 686 3-D convolutions; its column buffer is the `log_native_columns` feature and sets a floor
    (column_floor_s; docs/decisions/2026-12-04-three-d-im2col.md)."""
    if threads is None or op != "conv3d" or pass_ != "bwd_weight" or canonical_dtype(dtype) != "float32":
        return False
    if int(params.get("groups", 1)) != 1 or cpu_native_conv(op, params, dtype, threads):
        return False
    if any(v != 1 for v in per_dim(params, "dilation", 3, 1)):
        return False
    padding = per_dim(params, "padding", 3, 0)
    if not any(padding):
        return False
    channels = int_param(params, "C", op)
    depth, kernel_depth = spatial_sizes(params, op, 3)[0], per_dim(params, "kernel", 3, 1)[0]
    return 4 <= channels < 16 or (padding[0] > 0 and depth <= kernel_depth - padding[0])


def im2col_path(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int]) -> bool:
    """Whether a host convolution pass runs as im2col + GEMM rather than oneDNN's direct kernels (cpu_native_conv,
    onednn_gemm_conv, onednn_gemm_weight_grad): those keep plain layouts and multiply the padding's zeros."""
    return threads is not None and (cpu_native_conv(op, params, dtype, threads)
                                    or onednn_gemm_conv(op, pass_, params, dtype, threads)
                                    or onednn_gemm_weight_grad(op, pass_, params, dtype, threads))


def is_weight_design(sample: Sample) -> bool:
    """A sample of the weight floor's design (profiler.bench_compute: weight-bound convolutions), not a curve point."""
    return sample.benchmark in CONV_OPS and (sample.extra or {}).get("layer") == WEIGHT_DESIGN_LAYER


# ----------------------------------------------------------------------------------------- the work it executes
def im2col_columns(op: str, params: Mapping[str, Any]) -> int:
    """Elements of the im2col buffer of a convolution call: N * C / groups * prod(kernel) * output positions."""
    dims = 3 if op == "conv3d" else 2
    channels = int_param(params, "C", op) // int(params.get("groups", 1))
    return int_param(params, "N", op) * channels * math.prod(per_dim(params, "kernel", dims, 1)) \
        * shapes.conv_output_positions(op, params)


def in_bounds_tap_fraction(spatial, kernel, stride, padding) -> float:
    """Share of a convolution's kernel taps (over all output positions) that read the input rather than its zero
    padding: prod over dimensions of sum_o #{j < k: 0 <= o s - p + j < size} / (outputs k). oneDNN's direct
    kernels skip the taps in the padding, so a host call's work counts only these; im2col paths and GPUs'
    implicit GEMMs multiply the zeros (docs/decisions/2026-12-04-padding-taps.md)."""
    share = 1.0
    for size, k, st, p in zip(spatial, kernel, stride, padding):
        outputs = max(window_output_size(size, k, st, p), 1)
        # only positions near an edge lose taps: those starting before the input or ending past it
        edges = set(range(min(outputs, -(-p // st) + 1))) | set(range(max(0, (size + p - k) // st), outputs))
        taps = (outputs - len(edges)) * k + sum(max(0, min(k, size + p - o * st) - max(0, p - o * st))
                                                 for o in edges)
        share *= taps / (outputs * k)
    return share


def conv_gemm_slices(op: str, params: Mapping[str, Any]) -> int:
    """GEMMs per sample oneDNN's im2col convolution runs, each streaming the whole weight: one per output depth
    slice of a 3-D call (cpu/gemm_convolution.cpp), one for a 2-D call."""
    if op != "conv3d":
        return 1
    return window_output_size(spatial_sizes(params, op, 3)[0], per_dim(params, "kernel", 3, 1)[0],
                              per_dim(params, "stride", 3, 1)[0], per_dim(params, "padding", 3, 0)[0])


def pad_to_lanes(n: int, lanes: int) -> int:
    """n rounded up to whole blocks of `lanes` (a oneDNN blocked layout's channel dimension)."""
    return -(-n // lanes) * lanes


def lane_padded_channels(pass_: str, channels: int, filters: int, lanes: int) -> tuple[int, int]:
    """(C, F) as a oneDNN blocked convolution computes them, its padding lanes multiplying all the same: forward
    and backward-weight pad F, and C once it is more than one block (oneDNN's first-layer kernel reads fewer
    channels plain); backward-data pads both (docs/decisions/2026-11-30-simd-lane-padding.md)."""
    if pass_ == "bwd_data":
        return pad_to_lanes(channels, lanes), pad_to_lanes(filters, lanes)
    return (pad_to_lanes(channels, lanes) if channels > lanes else channels), pad_to_lanes(filters, lanes)


def work(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int],
         lanes: Optional[int] = None) -> dict[str, Any]:
    """calibrate.shapes.work of a call on a host running `threads` threads (None: rules off) with `lanes` float32
    SIMD lanes (None: no padding): a oneDNN direct convolution's work is its FLOPs with padded channels and only
    the in-bounds taps; the features gain OWN_FEATURES."""
    w = shapes.work(op, pass_, params, dtype)
    if shapes.op_kind(op) != "flops":
        return w
    native = gemm = False
    columns = 0
    if op in CONV_OPS:
        native = threads is not None and cpu_native_conv(op, params, dtype, threads)
        gemm = onednn_gemm_weight_grad(op, pass_, params, dtype, threads)  # im2col + GEMM, unpadded lanes
        columns = im2col_columns(op, params) if native or gemm else 0
        if threads is not None and lanes and not native and not gemm and canonical_dtype(dtype) == "float32":
            dims = 3 if op == "conv3d" else 2
            channels = int_param(params, "C", op) // int(params.get("groups", 1))
            filters = int_param(params, "F", op)
            c_pad, f_pad = lane_padded_channels(pass_, channels, filters, lanes)
            executed = w["flops"] * (c_pad * f_pad) / (channels * filters)
            if not onednn_gemm_conv(op, pass_, params, dtype, threads):  # the rest of im2col_path is out here
                executed *= in_bounds_tap_fraction(spatial_sizes(params, op, dims), per_dim(params, "kernel", dims, 1),
                                                   per_dim(params, "stride", dims, 1),
                                                   per_dim(params, "padding", dims, 0))
            w = shapes.executing(w, executed)
    return {**w, "features": list(w["features"]) + [float(native), math.log10(max(columns, 1.0))]}


def errors_by_kernel(feature_names: Sequence[str], points, preds: np.ndarray, truth: np.ndarray):
    """Held-out median error of the shapes oneDNN ran and of those PyTorch's native kernels ran, apart, when a
    family has both (FitQuality.by_kernel): the native kernels' shapes are the hardest, which one figure hides."""
    if "cpu_native_conv" not in feature_names:
        return None
    column = list(feature_names).index("cpu_native_conv")
    native = np.array([p.features[column] == 1.0 for p in points])
    if native.all() or not native.any():
        return None
    rel = relative_errors(preds, truth)
    return {"oneDNN": float(np.median(rel[~native])), "native": float(np.median(rel[native]))}


# ----------------------------------------------------------------------------------------- allocations
def onednn_blocked_buffers(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int],
                           lanes: Optional[int]) -> tuple[float, ...]:
    """Bytes of the blocked-layout (nC(D)HW16c) copies of its activations and weight a CPU float32 oneDNN
    convolution allocates afresh on every call, on top of its result (calibrate.shapes.allocations): a blocked
    output, and a blocked input except in the first-layer kernel; forward and backward-data also reorder the weight
    of more than one sample. Read off the mmap calls of single calls; () on an im2col path
    (docs/decisions/2026-12-04-blocked-copies-first-touch.md)."""
    if threads is None or not lanes or op not in CONV_OPS or canonical_dtype(dtype) != "float32":
        return ()
    if int(params.get("groups", 1)) != 1 or im2col_path(op, pass_, params, dtype, threads):
        return ()
    dims = 3 if op == "conv3d" else 2
    spatial = spatial_sizes(params, op, dims)
    kernel = per_dim(params, "kernel", dims, 1)
    channels, filters, batch = int_param(params, "C", op), int_param(params, "F", op), int_param(params, "N", op)
    out_volume = shapes.conv_output_volume(spatial, kernel, per_dim(params, "stride", dims, 1),
                                           per_dim(params, "padding", dims, 0))
    b = DTYPE_BYTES["float32"]
    pad = lambda n: pad_to_lanes(n, lanes)  # noqa: E731
    blocked_input = float(batch * pad(channels) * math.prod(spatial) * b)
    blocked_output = float(batch * pad(filters) * out_volume * b)
    first_layer = channels < lanes and math.prod(kernel) > 1
    # the weight, reordered afresh by the forward and backward-data passes of more than one sample (at batch 1
    # oneDNN reads it plain)
    weight = ((float(pad(filters) * (channels if first_layer else pad(channels)) * math.prod(kernel) * b),)
              if batch > 1 and pass_ in ("fwd", "bwd_data") else ())
    if pass_ == "bwd_data":
        return (blocked_output, blocked_input) + weight
    return ((blocked_output,) if first_layer else (blocked_output, blocked_input)) + weight


def first_touch_cost_s(fit: Optional[FirstTouchFit], sizes) -> float:
    """s_per_byte * the bytes of the fresh tensors at or above the mmap threshold (0 without a fit): glibc maps
    each afresh and the kernel faults its pages in on first write (docs/method.md §3, first touch)."""
    if fit is None:
        return 0.0
    return fit.s_per_byte * sum(b for b in sizes if b >= fit.threshold_bytes)


# ----------------------------------------------------------------------------------------- floors
def _at(weight: float, sizes: Sequence[float], values: Sequence[float]) -> float:
    """values interpolated linearly in log(weight) between sizes, held beyond the ends."""
    if weight <= sizes[0] or len(sizes) == 1:
        return float(values[0])
    if weight >= sizes[-1]:
        return float(values[-1])
    return float(np.interp(math.log(weight), [math.log(w) for w in sizes], values))


def weight_floor_s(fit: ConvWeightFit, op: str, pass_: str, params: Mapping[str, int], dtype: str,
                   threads: Optional[int] = None) -> float:
    """A convolution's time floor from its weight of W bytes and N samples (docs/method.md §3, weight floor):
    W a_pass(W), plus N W b(W) for the weight gradient (oneDNN reorders the weight on every call); a call oneDNN
    runs as im2col + GEMM (onednn_gemm_conv) with more than one output position takes the larger of that and
    W a'(W) + N S W b'(W), S = conv_gemm_slices. 0 for a pass the fit lacks."""
    weight = shapes.conv_weight_bytes(op, params, dtype)
    time_s = 0.0
    if pass_ in fit.s_per_byte:
        time_s = weight * _at(weight, fit.weight_bytes, fit.s_per_byte[pass_])
        if pass_ == "bwd_weight":
            time_s += int(params["N"]) * weight * _at(weight, fit.weight_bytes, fit.per_sample_s_per_byte)
    g = fit.im2col
    if g is not None and pass_ in g.s_per_byte and onednn_gemm_conv(op, pass_, params, dtype, threads) \
            and shapes.conv_output_positions(op, params) > 1:
        gemms = int(params["N"]) * conv_gemm_slices(op, params)
        time_s = max(time_s, weight * (_at(weight, g.weight_bytes, g.s_per_byte[pass_])
                                       + gemms * _at(weight, g.weight_bytes, g.per_sample_s_per_byte[pass_])))
    return time_s


def column_floor_s(fit: Optional[ColumnFloor], op: str, pass_: str, params: Mapping[str, int], dtype: str,
                   threads: Optional[int]) -> float:
    """im2col_columns * s_per_column for a 3-D weight gradient oneDNN runs as im2col + GEMM (0 without a fit or
    outside that regime; docs/method.md §3)."""
    if fit is None or not onednn_gemm_weight_grad(op, pass_, params, dtype, threads):
        return 0.0
    return im2col_columns(op, params) * fit.s_per_column


# ----------------------------------------------------------------------------------------- the backend
class HostBackend:
    """calibrate.backends.Backend of calls on the CPU: `threads` the thread count PyTorch's kernel choice depends
    on (None: none of the rules apply), `lanes` the float32 SIMD lanes convolutions are padded to (None: none)."""

    device_is_host = True
    own_features = frozenset(OWN_FEATURES)

    def __init__(self, threads: Optional[int] = None, lanes: Optional[int] = None):
        self.threads, self.lanes = threads, lanes

    @classmethod
    def of_coefficients(cls, coefficients: Coefficients) -> "HostBackend":
        return cls(coefficients.host_threads, coefficients.host_simd_lanes)

    @classmethod
    def of_machine(cls, machine) -> "HostBackend":
        return cls(None, simd_lanes(machine.cpu_capability) if machine is not None else None)

    def for_sample(self, sample) -> "HostBackend":
        """The backend as a calibration sample ran: its own thread count (a non-CPU sample: no host rules)."""
        return HostBackend(sample.threads if sample.device.startswith("cpu") else None, self.lanes)

    def feature_names(self, op: str) -> list[str]:
        return FLOP_FEATURES if shapes.op_kind(op) == "flops" else shapes.BYTE_FEATURES

    def work(self, op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> dict[str, Any]:
        return work(op, pass_, params, dtype, self.threads, self.lanes)

    def curve_point(self, sample, op: str, pass_: str, dtype: str) -> bool:
        """Whether a compute sample is a point of its family's efficiency curve: not the weight floor's design,
        nor a call oneDNN runs as im2col + GEMM (the weight floor costs those)."""
        return not is_weight_design(sample) and not onednn_gemm_conv(op, pass_, sample.params, dtype,
                                                                     self.for_sample(sample).threads)

    def family_candidates(self, op: str, params: Mapping[str, Any], dtype: str) -> tuple[str, ...]:
        return ()

    def floor_s(self, coefficients: Coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> float:
        """The larger of the convolution weight floor and the 3-D column floor (0 for other calls)."""
        floor = 0.0
        if op in CONV_OPS and coefficients.conv_weight is not None:
            floor = weight_floor_s(coefficients.conv_weight, op, pass_, params, dtype, self.threads)
        if op == "conv3d":
            floor = max(floor, column_floor_s(coefficients.conv_columns, op, pass_, params, dtype, self.threads))
        return floor

    def first_touch_s(self, coefficients: Coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                      fit: Optional[ComputeFit] = None, fitted_as: Optional[tuple] = None) -> float:
        """First touch a call pays beyond its measured or fitted time: a call whose benchmark wrote into a
        preallocated result (calibrate.shapes.PREALLOCATED_IN_BENCHMARK) pays for what it allocates in training;
        another, once costed by a family fit (`fit`, the call as that fit costs it: `fitted_as`) whose benchmarks
        never allocated a tensor of the threshold, pays for its result and oneDNN's blocked copies."""
        touch = coefficients.first_touch
        if touch is None:
            return 0.0
        if (op, pass_) in shapes.PREALLOCATED_IN_BENCHMARK:
            return first_touch_cost_s(touch, shapes.allocations(op, pass_, params, dtype))
        if fit is None or fit.largest_allocation_bytes is None or fit.largest_allocation_bytes >= touch.threshold_bytes:
            return 0.0
        op, pass_, params, dtype = fitted_as
        return first_touch_cost_s(touch, shapes.allocations(op, pass_, params, dtype)
                                  + onednn_blocked_buffers(op, pass_, params, dtype, self.threads, self.lanes))

    def kernel_time_s(self, coefficients: Coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                      search: bool, cache: dict) -> Optional[float]:
        return None

    def errors_by_kernel(self, feature_names, points, preds, truth):
        return errors_by_kernel(feature_names, points, preds, truth)

    def fit_fields(self, by_kind: Mapping[str, list], machine) -> dict[str, Any]:
        """The host's own coefficients from a profile's samples (calibrate.backends.host_fit)."""
        from calibrate.backends.host_fit import fit_conv_columns, fit_conv_weight, fit_first_touch

        compute = by_kind.get("compute", [])
        return {"host_simd_lanes": self.lanes,
                "conv_weight": fit_conv_weight(compute), "conv_columns": fit_conv_columns(compute),
                "first_touch": fit_first_touch(by_kind["alloc"]) if by_kind.get("alloc") else None}

    def report_lines(self, c: Coefficients, rate) -> list[str]:
        """The host's coefficients for `profiler show` (rate: a per-byte figure as calibrate.report prints it)."""
        lines = []
        if c.conv_weight:
            w = c.conv_weight
            at = "; ".join(f"{size / 1e6:.1f} MB: " + ", ".join(f"{p} {rate(v[i])}" for p, v in w.s_per_byte.items())
                           + f", weight gradient per sample {rate(w.per_sample_s_per_byte[i])}"
                           for i, size in enumerate(w.weight_bytes))
            lines.append(f"convolution weight floor (calibrate.backends.host), rate per weight byte at {at}")
            if w.im2col:
                g = w.im2col
                at = "; ".join(f"{size / 1e6:.1f} MB: " + ", ".join(
                    f"{p} {rate(g.s_per_byte[p][i])} + per sample {rate(g.per_sample_s_per_byte[p][i])}"
                    for p in g.s_per_byte) for i, size in enumerate(g.weight_bytes))
                lines.append(f"im2col convolution floor (oneDNN's GEMM fallback, a kernel wider than its map), rate "
                             f"per weight byte at {at}")
        if c.conv_columns:
            lines.append(f"im2col 3-D weight-gradient floor (oneDNN's GEMM fallback, 4-15 channels or a thin depth): "
                         f"{c.conv_columns.s_per_column * 1e9:.2f} ns per column element "
                         f"({c.conv_columns.samples} samples)")
        if c.first_touch:
            t = c.first_touch
            lines.append(f"first touch of a fresh host tensor >= {t.threshold_bytes / 2**20:.0f} MiB: "
                         f"{t.s_per_byte * 1e9:.2f} ns per byte ({rate(t.s_per_byte)})")
        return lines
