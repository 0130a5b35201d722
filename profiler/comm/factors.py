"""algbw and busbw as nccl-tests defines them (nccl-tests doc/PERFORMANCE.md):
algbw = S / t (bytes/s, SI), busbw = algbw * factor(op, n), so figures compare directly with nccl-tests."""
from __future__ import annotations

from kernels.collectives import OPERATIONS


def busbw_factor(op: str, n: int) -> float:
    """allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast, sendrecv, halo 1."""
    if op not in OPERATIONS:
        raise KeyError(f"unknown collective {op!r}; known: {', '.join(OPERATIONS)}")
    if n < 1:
        raise ValueError("group size must be >= 1")
    return OPERATIONS[op].busbw_factor(n)


def algbw_bytes_per_s(size_bytes: float, time_s: float) -> float:
    return size_bytes / time_s if time_s > 0 else float("inf")


def busbw_bytes_per_s(op: str, size_bytes: float, time_s: float, n: int) -> float:
    return algbw_bytes_per_s(size_bytes, time_s) * busbw_factor(op, n)
