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
    """One call's shape parameters as an order-insensitive key (integral floats as ints): how measured shapes,
    recorded calls and shapes-file entries are matched and de-duplicated."""
    return tuple(sorted((k, int(v) if isinstance(v, (int, float)) and float(v).is_integer() else v)
                        for k, v in params.items()))
