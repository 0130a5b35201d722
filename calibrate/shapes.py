"""Work (FLOPs, bytes moved) and efficiency features of one compute call, from its shape parameters.

The same function serves fitting (sample params) and prediction (cost-model params), so the features a
model was trained on are exactly those it is queried with.

FLOPs (docs/method.md §1, 2 FLOPs per multiply-add): gemm/linear 2*M*N*K for every pass (dX = dY W^T
and dW = X^T dY are GEMMs of the same size); convolution 2*N*F*C*prod(kernel)*prod(output spatial) for
fwd, bwd_data and bwd_weight alike. Bytes: every operand read or written once (a lower bound the learned
efficiency absorbs). Memory-bound ops count element reads+writes per pass (relu fwd: read x, write y).

`work` is what a fit divides time by: bytes for memory-bound ops, FLOPs for GEMMs, and for a host
convolution run by oneDNN the FLOPs its SIMD lanes execute (see `lane_padded_channels`).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from profiler.dtypes import DTYPE_BYTES, canonical_dtype
from profiler.errors import UserError
# shapes.shape_key and shapes.canonical_dtype stay this module's names too (calibrate.fit, the predictor)
from profiler.opmath import (ELEMENT_PASS_TENSORS, bmm_bytes, bmm_flops, conv_flops, conv_output_volume,  # noqa: F401
                             gemm_bytes, gemm_flops, sdpa_bytes, sdpa_flops, shape_key, window_output_size)

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

#: log_native_columns: log10 of the im2col buffer (N*C*prod(kernel)*output positions elements) that PyTorch's
#: native CPU convolution fills before its GEMM (and oneDNN's im2col weight gradient of a 3-D convolution,
#: onednn_gemm_weight_grad), 0 for every other call: at 4 filters the buffer is most of the
#: time (about 1.1 ns per element on one core), and beyond the caches each element costs more (a 57 MB
#: buffer ran at 3.5 ns). Appended last, so trees fitted before it existed index the same columns. With it,
#: the held-out median error of conv3d backward-weight went from 20.2% to 16.9%, forward from 15.8% to 14.5%
#: and backward-data from 6.2% to 5.5% (three one-thread quick profiles, two fold draws each, 2026-11-30).
FLOP_FEATURES = ["log_flops", "log_intensity", "log_min_dim", "log_batch", "log_in_channels",
                 "log_out_channels", "log_spatial", "kernel_volume", "cpu_native_conv", "log_native_columns"]
BYTE_FEATURES = ["log_bytes", "log_batch", "log_channels", "log_spatial", "spatial_dims", "kernel_volume"]
#: efficiency never rises when a size shrinks (+1 = non-decreasing in that feature, 0 = free), so a split
#: shape is never predicted more efficient than the shape it came from through a smaller batch, channel count
#: or spatial size. Total FLOPs and bytes are free: on CPUs a smaller call often runs faster per FLOP or byte
#: (its operands stay in cache); constraining FLOPs raised the held-out error of conv2d from 7-11% to 16-25%
#: on three quiet quick profiles, constraining bytes kept memory-bound ops at 15-64% (2026-11-29). The linear
#: trend in log work (calibrate.compute) stays >= 0.
MONOTONE = {"log_flops": 0, "log_bytes": 0, "log_min_dim": 1, "log_batch": 1, "log_in_channels": 1,
            "log_out_channels": 1, "log_channels": 1, "log_spatial": 1, "log_intensity": 0, "kernel_volume": 0,
            "cpu_native_conv": 0, "log_native_columns": 0, "spatial_dims": 0}
#: PyTorch's CPU float32 convolution leaves oneDNN for its own kernels below this N*C*size(2)*size(3)
NATIVE_CONV_MAX_ELEMENTS = 20480
#: float32 lanes of the vector ISA PyTorch's CPU kernels dispatch to (torch.backends.cpu.get_cpu_capability(),
#: recorded as Machine.cpu_capability): the channel block of oneDNN's blocked layouts (nChw16c on AVX-512,
#: nChw8c on AVX2). Other ISAs get no padding.
SIMD_FP32_LANES = {"AVX512": 16, "AVX2": 8}


def simd_lanes(cpu_capability: Optional[str]) -> Optional[int]:
    """The float32 lanes of a recorded CPU capability; None (no padding) when unknown or unrecorded."""
    return SIMD_FP32_LANES.get(cpu_capability or "")


def op_kind(op: str) -> str:
    if op in FLOP_OPS:
        return "flops"
    if op in MEMORY_OPS:
        return "bytes"
    raise UserError(f"unknown compute op {op!r}; known: {', '.join(FLOP_OPS + MEMORY_OPS)}")


def _int(params: Mapping[str, Any], key: str, op: str) -> int:
    if key not in params:
        raise UserError(f"{op} shape is missing '{key}' (got {', '.join(sorted(params)) or 'nothing'})")
    value = params[key]
    if isinstance(value, (list, tuple)):
        value = value[0] if value else 0
    return int(value)


def _per_dim(params: Mapping[str, Any], key: str, dims: int, default: int) -> list[int]:
    value = params.get(key, default)
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value] if len(value) == dims else [int(value[0])] * dims
    return [int(value)] * dims


def _spatial(params: Mapping[str, Any], op: str, dims: int) -> list[int]:
    keys = ["D", "H", "W"] if dims == 3 else ["H", "W"]
    return [_int(params, k, op) for k in keys]


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
    return (_per_dim(params, "kernel", 2, 1) == [3, 3] and _per_dim(params, "stride", 2, 1) == [1, 1]
            and _per_dim(params, "dilation", 2, 1) == [1, 1])


def conv_weight_bytes(op: str, params: Mapping[str, Any], dtype: str) -> float:
    """Bytes of a convolution's weight: F x C / groups x the kernel volume elements."""
    dims = 3 if op == "conv3d" else 2
    volume = math.prod(_per_dim(params, "kernel", dims, 1))
    channels = _int(params, "C", op) // max(1, int(params.get("groups", 1)))
    return float(_int(params, "F", op) * channels * volume * DTYPE_BYTES[canonical_dtype(dtype)])


def cpu_native_conv(op: str, params: Mapping[str, Any], dtype: str, threads: int) -> bool:
    """Whether PyTorch runs this CPU convolution with its native kernels (thnn_conv2d, slow_conv3d) instead of
    oneDNN: the float32 rule of `use_mkldnn` in aten/src/ATen/native/ConvUtils.h, checked against the aten op
    torch.profiler records in tests/calibrate/test_fit_shapes.py. The native kernels are up to 9x slower per FLOP here
    (a batch-1 16->32 conv3d at 32^3: 45 ms native vs 10 ms per sample through oneDNN at batch 2), a regime
    no smooth efficiency curve can follow, so the fit gets it as a feature."""
    if op not in ("conv2d", "conv3d") or canonical_dtype(dtype) != "float32":
        return False
    dims = 3 if op == "conv3d" else 2
    n, c = _int(params, "N", op), _int(params, "C", op)
    spatial = _spatial(params, op, dims)
    kernel = _per_dim(params, "kernel", dims, 1)
    strided = any(v != 1 for v in _per_dim(params, "stride", dims, 1))
    dilated = any(v != 1 for v in _per_dim(params, "dilation", dims, 1))
    one_by_one = kernel[-1] == 1 and kernel[-2] == 1
    if not (strided or dilated or n >= 16 or not one_by_one or threads > 1):
        return True
    groups = int(params.get("groups", 1))
    big_kernel = kernel[-1] > 3 and kernel[-2] > 3
    return not (groups > 1 or big_kernel or n > 1 or n * c * spatial[0] * spatial[1] > NATIVE_CONV_MAX_ELEMENTS)


def conv_output_positions(op: str, params: Mapping[str, Any]) -> int:
    """Output positions per sample of a convolution call."""
    dims = 3 if op == "conv3d" else 2
    return conv_output_volume(_spatial(params, op, dims), _per_dim(params, "kernel", dims, 1),
                              _per_dim(params, "stride", dims, 1), _per_dim(params, "padding", dims, 0))


def im2col_columns(op: str, params: Mapping[str, Any]) -> int:
    """Elements of the im2col buffer of a convolution call: N * C / groups * prod(kernel) * output positions."""
    dims = 3 if op == "conv3d" else 2
    channels = _int(params, "C", op) // int(params.get("groups", 1))
    return _int(params, "N", op) * channels * math.prod(_per_dim(params, "kernel", dims, 1)) \
        * conv_output_positions(op, params)


def in_bounds_tap_fraction(spatial, kernel, stride, padding) -> float:
    """Share of a convolution's kernel taps (over all output positions) that read the input rather than its zero
    padding: prod over dimensions of sum_o #{j < k: 0 <= o s - p + j < size} / (outputs k). oneDNN's direct CPU
    kernels skip the taps that fall in the padding (their kh/kd loops and per-column ow ranges are cut to the
    input), so a host call's work counts only these: a 38 -> 76 7x7 convolution with padding 3 on a 4x4 map at
    batch 66 computes 16 of 49 taps per position (1.27 ms measured forward, 3.2 ms predicted from all 49; the
    fitted efficiency had no small map with a wide kernel to learn it from). GPUs' implicit GEMMs and the
    im2col paths multiply the zeros: their work keeps every tap."""
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
    """GEMMs per sample oneDNN's im2col convolution (`gemm:jit`) runs: one per output depth slice of a 3-D call
    (`for (od = 0; od < jcp.od; ++od)` around im2col_dt_3d and the GEMM over oh * ow positions, in every pass of
    oneDNN's cpu/gemm_convolution.cpp), one for a 2-D call. Each of them streams the whole weight."""
    if op != "conv3d":
        return 1
    return window_output_size(_spatial(params, op, 3)[0], _per_dim(params, "kernel", 3, 1)[0],
                              _per_dim(params, "stride", 3, 1)[0], _per_dim(params, "padding", 3, 0)[0])


def onednn_gemm_conv(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int]) -> bool:
    """Whether oneDNN runs this CPU float32 convolution pass as im2col + one GEMM per sample (its `gemm:jit`
    implementation) instead of its direct JIT kernel. The direct forward kernel unrolls ur_w <= ow output
    columns and refuses a left padding wider than that (`if (jcp.l_pad > jcp.ur_w) return unimplemented` in
    oneDNN's jit_avx512_common_conv_kernel.cpp init_conf), so a kernel wider than the map it slides over (7x7,
    padding 3, on a 2x2 map) falls back; backward-data does the same at stride 1 over the input width, and at
    stride 2 runs another direct kernel (brgconv_strided). Checked against oneDNN's verbose log over kernels 3-9,
    maps 1-6 wide and strides 1-2, 2-D and 3-D, in tests/calibrate/test_fit_shapes.py. The weight is read once
    per sample (calibrate.conv_weight), 7-9x slower than the direct kernel there. The weight-gradient pass keeps
    its direct kernel in 2-D; the 3-D weight-gradient fallbacks are onednn_gemm_weight_grad's (calibrate.
    conv_columns). Native-kernel calls (cpu_native_conv), grouped and dilated ones never get here."""
    if threads is None or op not in ("conv2d", "conv3d") or canonical_dtype(dtype) != "float32":
        return False
    if pass_ not in ("fwd", "bwd_data") or int(params.get("groups", 1)) != 1 or cpu_native_conv(op, params, dtype, threads):
        return False
    dims = 3 if op == "conv3d" else 2
    if any(v != 1 for v in _per_dim(params, "dilation", dims, 1)):
        return False
    width = _spatial(params, op, dims)[-1]
    kernel, stride = _per_dim(params, "kernel", dims, 1)[-1], _per_dim(params, "stride", dims, 1)[-1]
    left_pad = _per_dim(params, "padding", dims, 0)[-1]
    if pass_ == "bwd_data":
        return stride == 1 and left_pad > width
    return left_pad > window_output_size(width, kernel, stride, left_pad)


def onednn_gemm_weight_grad(op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                            threads: Optional[int]) -> bool:
    """Whether oneDNN computes this CPU float32 3-D weight gradient as im2col + GEMM (`gemm:jit`, one GEMM per sample
    and output depth slice, cpu/gemm_convolution.cpp) instead of its direct kernel: with padding, when the input
    has 4-15 channels (more than the first-layer kernel's 1-3, less than one 16-lane block) or is so thin in depth
    that the first window reaches past it (D <= kernel depth - front padding). Read off oneDNN's verbose
    log (one thread, AVX-512) over 686 3-D convolutions of 1-32 channels, kernels 1-7, maps 1-8, strides 1-2, in
    tests/calibrate/test_fit_shapes.py; 2-D weight gradients keep the direct kernel. The column buffer it fills is
    the `log_native_columns` feature of the fit (`work`, im2col_columns), as for PyTorch's native kernels, and sets a
    floor on its time (calibrate.conv_columns): 4 -> 4 channels, 5x5x5 on 16^3 at batch 236 ran 239 ms, about
    16 GFLOP/s against the direct kernel's 100-200."""
    if threads is None or op != "conv3d" or pass_ != "bwd_weight" or canonical_dtype(dtype) != "float32":
        return False
    if int(params.get("groups", 1)) != 1 or cpu_native_conv(op, params, dtype, threads):
        return False
    if any(v != 1 for v in _per_dim(params, "dilation", 3, 1)):
        return False
    padding = _per_dim(params, "padding", 3, 0)
    if not any(padding):
        return False
    channels = _int(params, "C", op)
    depth, kernel_depth = _spatial(params, op, 3)[0], _per_dim(params, "kernel", 3, 1)[0]
    return 4 <= channels < 16 or (padding[0] > 0 and depth <= kernel_depth - padding[0])


def pad_to_lanes(n: int, lanes: int) -> int:
    """n rounded up to whole blocks of `lanes` (a oneDNN blocked layout's channel dimension)."""
    return -(-n // lanes) * lanes


def im2col_path(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int]) -> bool:
    """Whether a host convolution pass runs as im2col + GEMM rather than oneDNN's direct kernels: PyTorch's native
    kernels (cpu_native_conv), oneDNN's GEMM fallbacks (onednn_gemm_conv, onednn_gemm_weight_grad). Those keep plain
    layouts and multiply the padding's zeros."""
    return threads is not None and (cpu_native_conv(op, params, dtype, threads)
                                    or onednn_gemm_conv(op, pass_, params, dtype, threads)
                                    or onednn_gemm_weight_grad(op, pass_, params, dtype, threads))


def lane_padded_channels(pass_: str, channels: int, filters: int, lanes: int) -> tuple[int, int]:
    """(C, F) as a oneDNN blocked convolution computes them: the channel dimensions it vectorises rounded up to
    whole blocks of `lanes`, whose padding lanes do multiply-adds all the same (oneDNN's blocked layouts,
    nChw16c on AVX-512, pad the channel dimension to the block: "Understanding Memory Formats", oneDNN guide).
    Forward and backward-weight vectorise the filters F, and C once it is more than one block: below one block
    oneDNN's first-layer kernel reads C in the plain layout, unpadded. Backward-data computes dX over blocks of
    C from dY blocked over F, so both are padded. Which dimensions are padded was measured on three 2-thread
    AVX-512 quick profiles (2026-11-30), refitted with and without: held-out median errors went from 25-30% to
    16-21% (conv3d fwd), 21-29% to 10-17% (conv3d bwd_data) and 14-23% to 9-10% (conv2d bwd_data); padding
    every C in the forward pass (the 3-8 channel first layers too) raised them, and blocks of 8 fitted worse
    than 16 on that machine. Padding C above one block: docs/decisions/2026-11-30-simd-lane-padding.md."""
    if pass_ == "bwd_data":
        return pad_to_lanes(channels, lanes), pad_to_lanes(filters, lanes)
    return (pad_to_lanes(channels, lanes) if channels > lanes else channels), pad_to_lanes(filters, lanes)


def work(op: str, pass_: str, params: Mapping[str, Any], dtype: str,
         host_threads: Optional[int] = None, lanes: Optional[int] = None) -> dict[str, float]:
    """FLOPs, bytes, work (module docstring) and the efficiency features of one call.
    host_threads: the CPU thread count when the call runs on the host (None on a GPU), for the
    cpu_native_conv feature; lanes: the host's float32 SIMD lanes (simd_lanes), for lane_padded_channels."""
    b = DTYPE_BYTES[canonical_dtype(dtype)]
    kind = op_kind(op)
    if op in ("gemm", "linear"):
        m, n, k = (_int(params, key, op) for key in ("M", "N", "K"))
        flops = gemm_flops(m, n, k)
        nbytes = float(gemm_bytes(m, n, k, b))
        return _flop_features(flops, flops, nbytes, min(m, n, k), m, k, n, 1, 1, False, 0)
    if op == "bmm":  # features: the batch of products, reduction K, output width N, rows M as "spatial"
        batch, m, n, k = (_int(params, key, op) for key in ("B", "M", "N", "K"))
        flops = bmm_flops(batch, m, n, k)
        nbytes = float(bmm_bytes(batch, m, n, k, b))
        return _flop_features(flops, flops, nbytes, min(m, n, k), batch, k, n, m, 1, False, 0)
    if op == "sdpa":  # features: heads as the batch, the head size both widths, queries as "spatial", the
        # kernel-volume column 2 under a causal mask (its kernels skip half the blocks)
        heads, seq, dim = (_int(params, key, op) for key in ("B", "S", "D"))
        seq_kv, causal = int(params.get("T", seq)), bool(int(params.get("causal", 0)))
        if pass_ == "bwd_weight":
            raise UserError("sdpa bwd_weight has no kernel of its own (costs 0); it has no work to compute")
        flops = sdpa_flops(heads, seq, seq_kv, dim, pass_, causal)
        nbytes = float(sdpa_bytes(heads, seq, seq_kv, dim, pass_, b))
        return _flop_features(flops, flops, nbytes, min(seq, dim), heads, dim, dim, seq, 2 if causal else 1,
                              False, 0)
    dims = 3 if op.endswith("3d") or (kind == "bytes" and "D" in params) else 2  # 3-D pooling/BN carry D
    batch, channels = _int(params, "N", op), _int(params, "C", op)
    spatial = _spatial(params, op, dims)
    if kind == "flops":
        filters = _int(params, "F", op)
        groups = int(params.get("groups", 1))
        if groups < 1 or channels % groups or filters % groups:
            raise UserError(f"{op}: groups {groups} must divide channels {channels} and filters {filters}")
        channels_in = channels
        channels = channels // groups  # each output channel sees C / groups input channels
        kernel = _per_dim(params, "kernel", dims, 1)
        stride = _per_dim(params, "stride", dims, 1)
        padding = _per_dim(params, "padding", dims, 0)
        kvol, ovol = math.prod(kernel), conv_output_volume(spatial, kernel, stride, padding)
        flops = conv_flops(batch, channels, filters, kvol, ovol)
        nbytes = float(batch * channels_in * math.prod(spatial) + filters * channels * kvol + batch * filters * ovol) * b
        native = host_threads is not None and cpu_native_conv(op, params, dtype, host_threads)
        gemm = onednn_gemm_weight_grad(op, pass_, params, dtype, host_threads)  # im2col + GEMM, unpadded lanes
        columns = im2col_columns(op, params) if native or gemm else 0
        executed = flops
        if host_threads is not None and lanes and not native and not gemm and canonical_dtype(dtype) == "float32":
            c_pad, f_pad = lane_padded_channels(pass_, channels, filters, lanes)
            executed = flops * (c_pad * f_pad) / (channels * filters)
            if not onednn_gemm_conv(op, pass_, params, dtype, host_threads):  # the rest of im2col_path is out here
                executed *= in_bounds_tap_fraction(spatial, kernel, stride, padding)
        if pass_ == "bwd_data":  # dX (N*in_vol x C) = dY (N*out_vol x F*kvol) * W: C is the output width
            ivol = math.prod(spatial)
            return _flop_features(flops, executed, nbytes, min(batch * ivol, channels, filters * kvol), batch,
                                  filters, channels, ivol, kvol, native, columns)
        return _flop_features(flops, executed, nbytes, min(batch * ovol, filters, channels * kvol), batch, channels,
                              filters, ovol, kvol, native, columns)
    elems = batch * channels * math.prod(spatial)
    kvol = 1  # a pooling window's volume; 1 for element-wise ops
    if (op, pass_) in ZERO_COST:
        raise UserError(f"{op} {pass_} has no kernel of its own (costs 0); it has no work to compute")
    if op in ("maxpool", "avgpool"):
        kernel = _per_dim(params, "kernel", dims, 2)
        kvol = math.prod(kernel)
        stride = _per_dim(params, "stride", dims, kernel[0])
        padding = _per_dim(params, "padding", dims, 0)
        out_elems = batch * channels * conv_output_volume(spatial, kernel, stride, padding)
        index_bytes = POOL_INDEX_BYTES * out_elems if op == "maxpool" else 0
        nbytes = float(elems + out_elems) * b + index_bytes
    else:
        nbytes = float(_ELEMENT_PASSES[op][pass_] * elems) * b
    return {"flops": 0.0, "bytes": nbytes, "work": nbytes,
            "features": [_log(nbytes), _log(batch), _log(channels), _log(math.prod(spatial)), float(dims), float(kvol)]}


#: calls the profiler's benchmarks time writing into a preallocated result (`out=`), where training allocates it
#: afresh (profiler.bench_compute: gemm_case, build_relu_fwd, build_add); every other benchmark allocates its
#: result as autograd does
PREALLOCATED_IN_BENCHMARK = frozenset({("gemm", "fwd"), ("relu", "fwd"), ("add", "fwd")})


def allocations(op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> tuple[float, ...]:
    """Bytes of each fresh tensor one call allocates in a training step: its result (output, input gradient or
    weight gradient; a max-pool forward also its int64 indices). Batch-norm statistics and other per-channel
    tensors are left out (small). () for a call without a result of its own (zero-cost passes, attention)."""
    if (op, pass_) in ZERO_COST or op == "sdpa":
        return ()
    b = DTYPE_BYTES[canonical_dtype(dtype)]
    if op in ("gemm", "linear", "bmm"):
        batch = _int(params, "B", op) if op == "bmm" else 1
        m, n, k = (_int(params, key, op) for key in ("M", "N", "K"))
        rows, cols = {"fwd": (m, n), "bwd_data": (m, k), "bwd_weight": (k, n)}[pass_]
        return (float(batch * rows * cols * b),)
    dims = 3 if op.endswith("3d") or (op_kind(op) == "bytes" and "D" in params) else 2
    batch, channels = _int(params, "N", op), _int(params, "C", op)
    spatial = _spatial(params, op, dims)
    if op in ("conv2d", "conv3d"):
        if pass_ == "bwd_weight":
            return (conv_weight_bytes(op, params, dtype),)
        if pass_ == "bwd_data":
            return (float(batch * channels * math.prod(spatial) * b),)
        kernel = _per_dim(params, "kernel", dims, 1)
        ovol = conv_output_volume(spatial, kernel, _per_dim(params, "stride", dims, 1),
                                  _per_dim(params, "padding", dims, 0))
        return (float(batch * _int(params, "F", op) * ovol * b),)
    elems = batch * channels * math.prod(spatial)
    if op in ("maxpool", "avgpool") and pass_ == "fwd":
        kernel = _per_dim(params, "kernel", dims, 2)
        out = batch * channels * conv_output_volume(spatial, kernel, _per_dim(params, "stride", dims, kernel[0]),
                                                    _per_dim(params, "padding", dims, 0))
        return (float(out * b), float(out * POOL_INDEX_BYTES)) if op == "maxpool" else (float(out * b),)
    return (float(elems * b),)  # element-wise ops and a pooling backward: a tensor of the input's size


def onednn_blocked_buffers(op: str, pass_: str, params: Mapping[str, Any], dtype: str, threads: Optional[int],
                           lanes: Optional[int]) -> tuple[float, ...]:
    """Bytes of the blocked-layout copies of its activations and weight a CPU float32 oneDNN convolution allocates
    afresh on every call, on top of its result (`allocations`): PyTorch hands oneDNN plain NC(D)HW tensors, and its
    direct kernels read and write nC(D)HW16c ones, channels padded to whole blocks of `lanes`. The forward writes a
    blocked output and the weight gradient reads a blocked output gradient; backward-data both; the input is copied
    too except by the first-layer kernel (fewer channels than a block, a kernel wider than 1), which reads it
    plain; forward and backward-data reorder the weight (a 732 -> 732 3x3x3 convolution at batch 2 on 4^3 mapped a
    58.5 MB copy and took 49 ms forward, 24 ms with it reused). Read off the mmap calls of single calls (strace,
    mmap threshold 32 MiB, 2-core VM): a 4 -> 4 1x1 convolution at batch 168 on 64x64 maps two 44 MB buffers in
    each pass (16 padded channels) and ran 58 ms per pass, 8.5 ms with the buffers reused from the heap. Calls on
    an im2col path (im2col_path) keep plain layouts: ()."""
    if threads is None or not lanes or op not in ("conv2d", "conv3d") or canonical_dtype(dtype) != "float32":
        return ()
    if int(params.get("groups", 1)) != 1 or im2col_path(op, pass_, params, dtype, threads):
        return ()
    dims = 3 if op == "conv3d" else 2
    spatial = _spatial(params, op, dims)
    kernel = _per_dim(params, "kernel", dims, 1)
    channels, filters, batch = _int(params, "C", op), _int(params, "F", op), _int(params, "N", op)
    out_volume = conv_output_volume(spatial, kernel, _per_dim(params, "stride", dims, 1),
                                    _per_dim(params, "padding", dims, 0))
    b = DTYPE_BYTES["float32"]
    pad = lambda n: pad_to_lanes(n, lanes)  # noqa: E731
    blocked_input = float(batch * pad(channels) * math.prod(spatial) * b)
    blocked_output = float(batch * pad(filters) * out_volume * b)
    first_layer = channels < lanes and math.prod(kernel) > 1
    # the weight, reordered afresh by the forward and backward-data passes of more than one sample (at batch 1
    # oneDNN reads it plain: no copy was mapped for a 1360 -> 1360 3x3 convolution at batch 1, one of 66.6 MB at 8)
    weight = ((float(pad(filters) * (channels if first_layer else pad(channels)) * math.prod(kernel) * b),)
              if batch > 1 and pass_ in ("fwd", "bwd_data") else ())
    if pass_ == "bwd_data":
        return (blocked_output, blocked_input) + weight
    return ((blocked_output,) if first_layer else (blocked_output, blocked_input)) + weight


def benchmark_allocations(op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> tuple[float, ...]:
    """allocations() of the call as the profiler times it (none for PREALLOCATED_IN_BENCHMARK)."""
    return () if (op, pass_) in PREALLOCATED_IN_BENCHMARK else allocations(op, pass_, params, dtype)


def _log(v: float) -> float:
    return math.log10(max(v, 1.0))


def _flop_features(flops, executed, nbytes, min_dim, batch, c_in, c_out, spatial, kvol, native: bool,
                   native_columns: int) -> dict[str, Any]:
    """Features of the (implicit) GEMM a call runs: min_dim its smallest side, c_in its reduction width and
    c_out its output width per kernel tap, spatial the output positions per sample, native_columns the
    elements of a native kernel's im2col buffer (0 when oneDNN or a GPU runs it). `executed` (the work) are
    the FLOPs with SIMD padding; the FLOP and intensity features use it too."""
    return {"flops": flops, "bytes": nbytes, "work": executed,
            "features": [_log(executed), math.log10(max(executed, 1.0) / max(nbytes, 1.0)), _log(min_dim), _log(batch),
                         _log(c_in), _log(c_out), _log(spatial), float(kvol), float(native), _log(native_columns)]}


def feature_names(op: str) -> list[str]:
    return FLOP_FEATURES if op_kind(op) == "flops" else BYTE_FEATURES
