"""Work (FLOPs, bytes moved) and efficiency features of one compute call, from its shape parameters.

The same function serves fitting (sample params) and prediction (cost-model params), so the features a model was
trained on are exactly those it is queried with. FLOPs: 2 per multiply-add, the same for every pass of a GEMM,
linear layer or convolution (docs/method.md §1); bytes: every operand read or written once (a lower bound the
learned efficiency absorbs). `work` is what a fit divides time by: bytes for memory-bound ops, FLOPs for GEMMs and
convolutions. What a device adds (the work its kernels execute, features of its own) is its backend's
(calibrate.backends).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from profiler.dtypes import DTYPE_BYTES, canonical_dtype
from profiler.errors import UserError
# shapes.shape_key and shapes.canonical_dtype stay this module's names too (calibrate.fit, the predictor)
from profiler.opmath import (ELEMENT_PASS_TENSORS, bmm_bytes, bmm_flops, conv_flops, conv_output_volume,  # noqa: F401
                             gemm_bytes, gemm_flops, sdpa_bytes, sdpa_flops, shape_key)

#: bmm {B, M, N, K}: a batched GEMM (attention's score and context products); sdpa {B, S, D[, T][, causal]}:
#: fused attention over B = samples x heads, S queries, T keys (default S), head size D
FLOP_OPS = ("gemm", "linear", "conv2d", "conv3d", "bmm", "sdpa")
#: the matrix products among them: a published profile costs them at its measured GEMM fraction of peak, and the
#: per-GPU-family time scales fitted to CNN training runs (calibrate.system_constants: what a convolution in a
#: training step loses against that GEMM) do not apply to them
MATMUL_OPS = ("gemm", "linear", "bmm", "sdpa")
#: layernorm, gelu and softmax take {N, C, H, W} like the CNN ops: a (seq, hidden) activation per sample is
#: C = seq, H = 1, W = hidden, attention scores (heads, seq, seq) are C = heads, H = W = seq
MEMORY_OPS = ("batchnorm", "relu", "maxpool", "avgpool", "add", "layernorm", "gelu", "softmax")
#: tensors read + written (in units of the input tensor) per memory-bound op and pass (profiler.opmath).
#: The backward of a memory-bound op is one call (`bwd`, costed as bwd_data; see ZERO_COST).
_ELEMENT_PASSES = ELEMENT_PASS_TENSORS
POOL_INDEX_BYTES = 8  # maxpool keeps int64 indices of the maxima
#: (op, pass) with no kernel of its own: a memory-bound op's whole backward is measured as one call and
#: costed as bwd_data (so bwd_weight is 0), and add's backward passes dy through without a kernel. Fused
#: attention's backward is one call too (`bwd`, as bwd_data); its inputs carry no weights.
ZERO_COST = ({(op, "bwd_weight") for op in ("batchnorm", "relu", "maxpool", "avgpool", "add", "layernorm", "gelu",
                                            "softmax", "sdpa")} | {("add", "bwd_data")})
#: sample variant -> pass (memory-bound benchmarks write one `bwd` variant)
VARIANT_PASS = {"bwd": "bwd_data"}

#: the generic features of a GEMM or convolution's (implicit) GEMM (_flop_features) and of a memory-bound call; a
#: backend appends its own (calibrate.backends), and a fit stores the list it was trained on
FLOP_FEATURES = ["log_flops", "log_intensity", "log_min_dim", "log_batch", "log_in_channels",
                 "log_out_channels", "log_spatial", "kernel_volume"]
BYTE_FEATURES = ["log_bytes", "log_batch", "log_channels", "log_spatial", "spatial_dims", "kernel_volume"]
#: efficiency never rises when a size shrinks (+1 = non-decreasing in that feature, 0 = free), so a split
#: shape is never predicted more efficient than the shape it came from through a smaller batch, channel count
#: or spatial size. Total FLOPs and bytes are free: on CPUs a smaller call often runs faster per FLOP or byte
#: (its operands stay in cache; docs/decisions/2026-11-29-memory-bound-op-fits.md). A backend's own features
#: are free too. The linear trend in log work (calibrate.compute) stays >= 0.
MONOTONE = {"log_flops": 0, "log_bytes": 0, "log_min_dim": 1, "log_batch": 1, "log_in_channels": 1,
            "log_out_channels": 1, "log_channels": 1, "log_spatial": 1, "log_intensity": 0, "kernel_volume": 0,
            "spatial_dims": 0}

#: a grouped convolution's family: its own fits, apart from the dense convolution's (a depthwise 3x3 on a GPU runs
#: several times slower per FLOP than a dense one; calibrate.cost_model tries f"{op}{GROUPED_SUFFIX}" first)
GROUPED_SUFFIX = "_grouped"


def family_op(op: str, params: Mapping[str, Any]) -> str:
    """The op part of a call's compute family: a convolution with groups > 1 is conv2d_grouped (conv3d_grouped),
    every other call its op."""
    if op in ("conv2d", "conv3d") and int(params.get("groups", 1)) > 1:
        return op + GROUPED_SUFFIX
    return op


def base_op(family: str) -> str:
    """The op whose work a family's calls do (family_op's inverse): conv2d for conv2d_grouped."""
    return family[:-len(GROUPED_SUFFIX)] if family.endswith(GROUPED_SUFFIX) else family


def op_kind(op: str) -> str:
    if op in FLOP_OPS:
        return "flops"
    if op in MEMORY_OPS:
        return "bytes"
    raise UserError(f"unknown compute op {op!r}; known: {', '.join(FLOP_OPS + MEMORY_OPS)}")


def int_param(params: Mapping[str, Any], key: str, op: str) -> int:
    if key not in params:
        raise UserError(f"{op} shape is missing '{key}' (got {', '.join(sorted(params)) or 'nothing'})")
    value = params[key]
    if isinstance(value, (list, tuple)):
        value = value[0] if value else 0
    return int(value)


def per_dim(params: Mapping[str, Any], key: str, dims: int, default: int) -> list[int]:
    value = params.get(key, default)
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value] if len(value) == dims else [int(value[0])] * dims
    return [int(value)] * dims


def spatial_sizes(params: Mapping[str, Any], op: str, dims: int) -> list[int]:
    keys = ["D", "H", "W"] if dims == 3 else ["H", "W"]
    return [int_param(params, k, op) for k in keys]


def conv_weight_bytes(op: str, params: Mapping[str, Any], dtype: str) -> float:
    """Bytes of a convolution's weight: F x C / groups x the kernel volume elements."""
    dims = 3 if op == "conv3d" else 2
    volume = math.prod(per_dim(params, "kernel", dims, 1))
    channels = int_param(params, "C", op) // max(1, int(params.get("groups", 1)))
    return float(int_param(params, "F", op) * channels * volume * DTYPE_BYTES[canonical_dtype(dtype)])


def conv_output_positions(op: str, params: Mapping[str, Any]) -> int:
    """Output positions per sample of a convolution call."""
    dims = 3 if op == "conv3d" else 2
    return conv_output_volume(spatial_sizes(params, op, dims), per_dim(params, "kernel", dims, 1),
                              per_dim(params, "stride", dims, 1), per_dim(params, "padding", dims, 0))


def work(op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> dict[str, Any]:
    """FLOPs, bytes, work (module docstring) and the generic efficiency features (feature_names) of one call."""
    b = DTYPE_BYTES[canonical_dtype(dtype)]
    kind = op_kind(op)
    if op in ("gemm", "linear"):
        m, n, k = (int_param(params, key, op) for key in ("M", "N", "K"))
        flops = gemm_flops(m, n, k)
        nbytes = float(gemm_bytes(m, n, k, b))
        return _flop_features(flops, nbytes, min(m, n, k), m, k, n, 1, 1)
    if op == "bmm":  # features: the batch of products, reduction K, output width N, rows M as "spatial"
        batch, m, n, k = (int_param(params, key, op) for key in ("B", "M", "N", "K"))
        flops = bmm_flops(batch, m, n, k)
        nbytes = float(bmm_bytes(batch, m, n, k, b))
        return _flop_features(flops, nbytes, min(m, n, k), batch, k, n, m, 1)
    if op == "sdpa":  # features: heads as the batch, the head size both widths, queries as "spatial", the
        # kernel-volume column 2 under a causal mask (its kernels skip half the blocks)
        heads, seq, dim = (int_param(params, key, op) for key in ("B", "S", "D"))
        seq_kv, causal = int(params.get("T", seq)), bool(int(params.get("causal", 0)))
        if pass_ == "bwd_weight":
            raise UserError("sdpa bwd_weight has no kernel of its own (costs 0); it has no work to compute")
        flops = sdpa_flops(heads, seq, seq_kv, dim, pass_, causal)
        nbytes = float(sdpa_bytes(heads, seq, seq_kv, dim, pass_, b))
        return _flop_features(flops, nbytes, min(seq, dim), heads, dim, dim, seq, 2 if causal else 1)
    dims = 3 if op.endswith("3d") or (kind == "bytes" and "D" in params) else 2  # 3-D pooling/BN carry D
    batch, channels = int_param(params, "N", op), int_param(params, "C", op)
    spatial = spatial_sizes(params, op, dims)
    if kind == "flops":
        filters = int_param(params, "F", op)
        groups = int(params.get("groups", 1))
        if groups < 1 or channels % groups or filters % groups:
            raise UserError(f"{op}: groups {groups} must divide channels {channels} and filters {filters}")
        channels_in = channels
        channels = channels // groups  # each output channel sees C / groups input channels
        kernel = per_dim(params, "kernel", dims, 1)
        stride = per_dim(params, "stride", dims, 1)
        padding = per_dim(params, "padding", dims, 0)
        kvol, ovol = math.prod(kernel), conv_output_volume(spatial, kernel, stride, padding)
        flops = conv_flops(batch, channels, filters, kvol, ovol)
        nbytes = float(batch * channels_in * math.prod(spatial) + filters * channels * kvol + batch * filters * ovol) * b
        if pass_ == "bwd_data":  # dX (N*in_vol x C) = dY (N*out_vol x F*kvol) * W: C is the output width
            ivol = math.prod(spatial)
            return _flop_features(flops, nbytes, min(batch * ivol, channels, filters * kvol), batch, filters,
                                  channels, ivol, kvol)
        return _flop_features(flops, nbytes, min(batch * ovol, filters, channels * kvol), batch, channels, filters,
                              ovol, kvol)
    elems = batch * channels * math.prod(spatial)
    kvol = 1  # a pooling window's volume; 1 for element-wise ops
    if (op, pass_) in ZERO_COST:
        raise UserError(f"{op} {pass_} has no kernel of its own (costs 0); it has no work to compute")
    if op in ("maxpool", "avgpool"):
        kernel = per_dim(params, "kernel", dims, 2)
        kvol = math.prod(kernel)
        stride = per_dim(params, "stride", dims, kernel[0])
        padding = per_dim(params, "padding", dims, 0)
        out_elems = batch * channels * conv_output_volume(spatial, kernel, stride, padding)
        index_bytes = POOL_INDEX_BYTES * out_elems if op == "maxpool" else 0
        nbytes = float(elems + out_elems) * b + index_bytes
    else:
        nbytes = float(_ELEMENT_PASSES[op][pass_] * elems) * b
    return {"flops": 0.0, "bytes": nbytes, "work": nbytes,
            "features": [_log(nbytes), _log(batch), _log(channels), _log(math.prod(spatial)), float(dims), float(kvol)]}


#: calls the host's benchmarks time writing into a preallocated result (`out=`), where training allocates it
#: afresh (profiler.bench_compute: gemm_case, build_relu_fwd, build_add, linear_cases' weight gradient, whose fresh
#: 67 MB result the benchmark faulted in or not depending on the heap it met: docs/decisions/2026-12-06-gpu-grid.md);
#: every other benchmark allocates its result as autograd does (a GPU's allocate all of theirs)
PREALLOCATED_IN_BENCHMARK = frozenset({("gemm", "fwd"), ("relu", "fwd"), ("add", "fwd"), ("linear", "bwd_weight")})


def allocations(op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> tuple[float, ...]:
    """Bytes of each fresh tensor one call allocates in a training step: its result (output, input gradient or
    weight gradient; a max-pool forward also its int64 indices). Batch-norm statistics and other per-channel
    tensors are left out (small). () for a call without a result of its own (zero-cost passes, attention)."""
    if (op, pass_) in ZERO_COST or op == "sdpa":
        return ()
    b = DTYPE_BYTES[canonical_dtype(dtype)]
    if op in ("gemm", "linear", "bmm"):
        batch = int_param(params, "B", op) if op == "bmm" else 1
        m, n, k = (int_param(params, key, op) for key in ("M", "N", "K"))
        rows, cols = {"fwd": (m, n), "bwd_data": (m, k), "bwd_weight": (k, n)}[pass_]
        return (float(batch * rows * cols * b),)
    dims = 3 if op.endswith("3d") or (op_kind(op) == "bytes" and "D" in params) else 2
    batch, channels = int_param(params, "N", op), int_param(params, "C", op)
    spatial = spatial_sizes(params, op, dims)
    if op in ("conv2d", "conv3d"):
        if pass_ == "bwd_weight":
            return (conv_weight_bytes(op, params, dtype),)
        if pass_ == "bwd_data":
            return (float(batch * channels * math.prod(spatial) * b),)
        kernel = per_dim(params, "kernel", dims, 1)
        ovol = conv_output_volume(spatial, kernel, per_dim(params, "stride", dims, 1),
                                  per_dim(params, "padding", dims, 0))
        return (float(batch * int_param(params, "F", op) * ovol * b),)
    elems = batch * channels * math.prod(spatial)
    if op in ("maxpool", "avgpool") and pass_ == "fwd":
        kernel = per_dim(params, "kernel", dims, 2)
        out = batch * channels * conv_output_volume(spatial, kernel, per_dim(params, "stride", dims, kernel[0]),
                                                    per_dim(params, "padding", dims, 0))
        return (float(out * b), float(out * POOL_INDEX_BYTES)) if op == "maxpool" else (float(out * b),)
    return (float(elems * b),)  # element-wise ops and a pooling backward: a tensor of the input's size


def benchmark_allocations(op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> tuple[float, ...]:
    """allocations() of the call as the profiler times it (none for PREALLOCATED_IN_BENCHMARK)."""
    return () if (op, pass_) in PREALLOCATED_IN_BENCHMARK else allocations(op, pass_, params, dtype)


def _log(v: float) -> float:
    return math.log10(max(v, 1.0))


def _flop_features(flops, nbytes, min_dim, batch, c_in, c_out, spatial, kvol) -> dict[str, Any]:
    """Features of the (implicit) GEMM a call runs: min_dim its smallest side, c_in its reduction width and
    c_out its output width per kernel tap, spatial the output positions per sample."""
    return {"flops": flops, "bytes": nbytes, "work": flops,
            "features": [_log(flops), _intensity(flops, nbytes), _log(min_dim), _log(batch), _log(c_in), _log(c_out),
                         _log(spatial), float(kvol)]}


def _intensity(work_: float, nbytes: float) -> float:
    return math.log10(max(work_, 1.0) / max(nbytes, 1.0))


def executing(w: dict[str, Any], executed: float) -> dict[str, Any]:
    """A GEMM or convolution's `work` result with `executed` FLOPs as its work, where a backend's kernels execute
    more or fewer multiply-adds than the call's FLOPs (calibrate.backends.host: channels padded to vector blocks): the work
    and intensity features follow it."""
    return {**w, "work": executed,
            "features": [_log(executed), _intensity(executed, w["bytes"])] + list(w["features"][2:])}


def feature_names(op: str) -> list[str]:
    return FLOP_FEATURES if op_kind(op) == "flops" else BYTE_FEATURES
