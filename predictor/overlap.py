"""Gradient allreduce overlapped with backward in DDP-style buckets.

PyTorch DDP groups gradients into buckets of ~25 MB in reverse layer order and launches each bucket's
allreduce as soon as backward has produced all its gradients; buckets go out one after another on one
communication stream. With layer l's gradient ready when backward has finished layer l:

    ready_k = backward time until the earliest layer of bucket k is done
    end_k   = max(ready_k, end_{k-1}) + T_allreduce(bytes_k)
    exposed = max(0, end_last - backward_total),  hidden = sum(T_allreduce) - exposed

ParaDL charges the whole Allreduce after backward (strategies.md §3, "Data"); this is the overlap it lacks.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Callable, Sequence


def bucket_layout(grad_bytes: Sequence[float], bucket_bytes: float) -> list[tuple[int, float]]:
    """DDP buckets for per-layer gradient bytes in forward order: (ready position, bytes) per bucket,
    the position counting layers from the last one (0 = last layer), i.e. in backward order."""
    out = []
    pending = 0.0
    pos = -1
    for pos, g in enumerate(reversed(grad_bytes)):
        pending += g
        if pending >= bucket_bytes:
            out.append((pos, pending))
            pending = 0.0
    if pending > 0:
        out.append((pos, pending))
    return out


def ready_times(bwd_s: Sequence[float]) -> list[float]:
    """Backward clock after each layer, walking from the last layer (bwd_s in forward order)."""
    return list(accumulate(reversed(bwd_s)))


def overlap(layout: Sequence[tuple[int, float]], ready: Sequence[float],
            allreduce_s: Callable[[float], float]) -> tuple[float, float]:
    """(exposed_s, hidden_s) of the bucketed allreduce. ready: ready_times(per-layer backward seconds);
    allreduce_s(bytes): time of one allreduce of that many bytes over the data-parallel group."""
    total_bwd = ready[-1] if ready else 0.0
    comm_end = 0.0
    total = 0.0
    for pos, size in layout:
        c = allreduce_s(size)
        comm_end = max(comm_end, ready[pos]) + c
        total += c
    exposed = max(0.0, comm_end - total_bwd)
    return exposed, total - exposed
