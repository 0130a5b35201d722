"""Output sizes and FLOPs of the ops a training step runs, defined once for every stage (the profiler's cases,
the fits, the predictor's graph, tracer and synthetic machines). Bytes per element: profiler.dtypes.

FLOPs count 2 per multiply-add (the convention of cuBLAS/cuDNN throughput figures and of ParaDL), and every
pass of a GEMM or convolution does the same work: for Y = X W, dX = dY W^T and dW = X^T dY are GEMMs of the
same three sizes (docs/method.md §3).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence


def window_output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """Positions a convolution or pooling window takes along one dimension: floor((size + 2 padding - kernel) /
    stride) + 1 (PyTorch's Conv/MaxPool output size, dilation 1)."""
    return (size + 2 * padding - kernel) // stride + 1


def window_output_dims(dims: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                       padding: Sequence[int]) -> tuple[int, ...]:
    """window_output_size along every spatial dimension."""
    return tuple(window_output_size(s, k, st, p) for s, k, st, p in zip(dims, kernel, stride, padding))


def dilated_extent(kernel: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    """Positions a dilated kernel spans per dimension: (k - 1) d + 1 (a window of that size in window_output_size)."""
    return tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))


def transposed_output_size(size: int, kernel: int, stride: int, padding: int, output_padding: int = 0) -> int:
    """Positions a transposed convolution writes along one dimension: (size - 1) stride - 2 padding + kernel +
    output_padding (PyTorch's ConvTranspose output size, dilation 1)."""
    return (size - 1) * stride - 2 * padding + kernel + output_padding


def gemm_flops(m: int, n: int, k: int) -> float:
    """2 M N K: C (M x N) = A (M x K) B (K x N)."""
    return 2.0 * m * n * k


def gemm_bytes(m: int, n: int, k: int, element_bytes: int) -> int:
    """Compulsory traffic of C (M x N) = A (M x K) B (K x N): read A and B, write C once (every pass of a
    GEMM or linear layer moves the same three tensors)."""
    return element_bytes * (m * k + k * n + m * n)


def conv_flops(batch: int, in_channels_per_group: int, filters: int, kernel_volume: int, output_volume: int) -> float:
    """2 N F (C / groups) prod(kernel) prod(output): each output element is a dot product over C / groups input
    channels and the kernel window."""
    return 2.0 * batch * filters * in_channels_per_group * kernel_volume * output_volume


def conv_output_volume(dims: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                       padding: Sequence[int]) -> int:
    """Output positions of one sample's convolution (at least 1 per dimension)."""
    return math.prod(max(o, 1) for o in window_output_dims(dims, kernel, stride, padding))


def shape_key(params: Mapping[str, Any]) -> tuple:
    """One call's shape parameters as an order-insensitive key (integral floats as ints, per-dimension lists such
    as kernel [R, S] as tuples): how measured shapes, recorded calls and shapes-file entries are matched and
    de-duplicated."""
    return tuple(sorted((k, _key_value(v)) for k, v in params.items()))


def _key_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_key_value(v) for v in value)
    return int(value) if isinstance(value, (int, float)) and float(value).is_integer() else value


# ---------------------------------------------------------------------------------------------- transformer ops
def bmm_flops(batch: int, m: int, n: int, k: int) -> float:
    """2 B M N K: `batch` independent GEMMs C (M x N) = A (M x K) B (K x N) (attention's score Q K^T and
    context P V products, one per sample and head). Each backward pass is a batched GEMM of the same size."""
    return batch * gemm_flops(m, n, k)


def bmm_bytes(batch: int, m: int, n: int, k: int, element_bytes: int) -> int:
    """Compulsory traffic of a batched GEMM: every one of its `batch` GEMMs reads A and B and writes C once."""
    return batch * gemm_bytes(m, n, k, element_bytes)


def gemm_backward_shape(pass_: str, m: int, n: int, k: int) -> tuple[int, int, int]:
    """(M, N, K) of the forward GEMM a backward pass of C = A B runs, for A (M x K), B (K x N):
    bwd_data dA = dC B^T is (M, K, N), bwd_weight dB = A^T dC is (K, N, M) (2 M N K FLOPs each)."""
    return {"fwd": (m, n, k), "bwd_data": (m, k, n), "bwd_weight": (k, n, m)}[pass_]


#: backward FLOPs of fused attention per forward FLOP: FlashAttention's backward runs five GEMMs of the
#: forward's two sizes (recomputed S = Q K^T, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q), so 2.5x
#: (Dao, "FlashAttention-2", 2023, §3.1 and its benchmark's FLOP count)
SDPA_BWD_PER_FWD = 2.5


def sdpa_flops(batch_heads: int, seq_q: int, seq_kv: int, head_dim: int, pass_: str, causal: bool) -> float:
    """FLOPs of fused scaled-dot-product attention over `batch_heads` (samples x heads) heads: forward
    4 B Sq Skv d (Q K^T and P V, 2 Sq Skv d each), backward SDPA_BWD_PER_FWD times that; a causal mask halves
    both, as the fused kernels skip the masked blocks (FlashAttention-2's benchmark convention). The softmax's
    few FLOPs per score are left out, as in Megatron-LM's count (Narayanan et al., SC'21, appendix)."""
    fwd = 4.0 * batch_heads * seq_q * seq_kv * head_dim * (0.5 if causal else 1.0)
    return fwd if pass_ == "fwd" else SDPA_BWD_PER_FWD * fwd


def sdpa_bytes(batch_heads: int, seq_q: int, seq_kv: int, head_dim: int, pass_: str, element_bytes: int) -> int:
    """Compulsory traffic of fused attention (no score matrix in memory): forward reads Q, K, V and writes O
    and the float32 log-sum-exp per query; backward reads Q, K, V, O, dO and the log-sum-exp and writes dQ, dK,
    dV (FlashAttention's IO, Dao et al. 2022, §3.2)."""
    q, kv = batch_heads * seq_q * head_dim, batch_heads * seq_kv * head_dim
    lse = 4 * batch_heads * seq_q
    if pass_ == "fwd":
        return element_bytes * (2 * q + 2 * kv) + lse
    return element_bytes * (4 * q + 4 * kv) + lse


#: tensors of the input's size one call reads plus writes, per memory-bound op and pass (compulsory traffic):
#: batchnorm, layernorm fwd x -> y, bwd dy, x -> dx (the per-row or per-channel statistics are small);
#: relu, gelu fwd x -> y, bwd dy, x or y -> dx; softmax fwd x -> y, bwd dy, y -> dx; add a, b -> c;
#: bias_dropout_add (Megatron-LM's fused bias + dropout + residual add, one kernel per pass) fwd x, residual ->
#: residual + dropout(x), bwd dy -> dx = dy * mask / (1 - p) (the residual's gradient is dy itself; the 1-byte
#: mask, written forward and read backward, and the h-element bias are left out, as for a dropout)
ELEMENT_PASS_TENSORS = {
    "relu": {"fwd": 2, "bwd_data": 3},
    "gelu": {"fwd": 2, "bwd_data": 3},
    "add": {"fwd": 3},
    "batchnorm": {"fwd": 2, "bwd_data": 3},
    "layernorm": {"fwd": 2, "bwd_data": 3},
    "softmax": {"fwd": 2, "bwd_data": 3},
    "bias_dropout_add": {"fwd": 3, "bwd_data": 2},
}
#: FLOPs per element, reported only (time comes from the bytes): layer norm fwd mean, variance, normalise,
#: affine (~8), bwd ~12 as batch norm's; GELU's tanh form ~8 and its derivative ~12; softmax max, exp, sum,
#: divide (~4) and bwd dy*y - y*sum(dy*y) (~4); bias_dropout_add the mask's scale and the add (2) and bwd the
#: scale (1), a dropout's and an add's together
ELEMENT_FLOPS = {"layernorm": (8, 12), "rmsnorm": (4, 8), "gelu": (8, 12), "softmax": (4, 4),
                 "bias_dropout_add": (2, 1)}
#: bytes of one token id (int64), read by an embedding lookup
TOKEN_ID_BYTES = 8


def element_pass_bytes(op: str, pass_: str, elems: int, element_bytes: int) -> int:
    """Bytes a memory-bound op moves over `elems` elements in one pass (ELEMENT_PASS_TENSORS)."""
    return ELEMENT_PASS_TENSORS[op][pass_] * elems * element_bytes


def embedding_bytes(tokens: int, hidden: int, vocab: int, pass_: str, element_bytes: int) -> int:
    """An embedding lookup's traffic. fwd: read the token ids and their rows, write the output (tokens x
    hidden). bwd_weight (the table's gradient, PyTorch's embedding_dense_backward): zero a vocab x hidden
    gradient, read dY, and add each row into it (read and write a row per token). The ids get no gradient."""
    rows = tokens * hidden * element_bytes
    if pass_ == "fwd":
        return tokens * TOKEN_ID_BYTES + 2 * rows
    return vocab * hidden * element_bytes + tokens * TOKEN_ID_BYTES + 3 * rows


#: the loss runs in float32 under autocast mixed precision (log_softmax and nll_loss are on autocast's
#: float32 list, PyTorch's AMP op reference), so its tensors are 4 bytes per element in every plan dtype
LOSS_ELEMENT_BYTES = 4


def cross_entropy_bytes(tokens: int, classes: int, pass_: str, logits_bytes: int = LOSS_ELEMENT_BYTES,
                        impl: str = "float32") -> int:
    """Cross-entropy over `classes` logits per token, as log_softmax then nll_loss. fwd: read the logits and
    write the log-probabilities (saved for backward). bwd: nll_loss_backward writes a zeroed tokens x classes
    gradient with one entry per row, log_softmax_backward reads it and the log-probabilities and writes dX.
    impl (predictor.plan.CROSS_ENTROPY_IMPLS): "float32" runs it on a float32 copy of half-precision logits (read
    2, write 4 bytes each; dX cast back: read 4, write 2), "half" at the logits' own precision, "fused" reads the
    logits once forward and once backward, writing dX (flash-attn's CrossEntropyLoss: per-row statistics only)."""
    elems = tokens * classes
    if impl == "fused":
        return (1 if pass_ == "fwd" else 2) * elems * logits_bytes
    element = logits_bytes if impl == "half" else LOSS_ELEMENT_BYTES
    cast = elems * (logits_bytes + LOSS_ELEMENT_BYTES) if impl == "float32" and logits_bytes != LOSS_ELEMENT_BYTES else 0
    return (2 if pass_ == "fwd" else 4) * elems * element + cast


def cross_entropy_flops(tokens: int, classes: int, pass_: str) -> float:
    """log_softmax (max, exp, sum, subtract: ~4 per logit) and its backward (~3 per logit); reported only."""
    return float(tokens * classes * (4 if pass_ == "fwd" else 3))

