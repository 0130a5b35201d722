"""Collective algorithm formulas: bus-bandwidth factors and latency step counts per operation.

Sources (../shared/reference):
  bus factors: microbenchmarks.md §1.2 (nccl-tests busbw) = the bandwidth terms of strategies.md §2.2
    (Thakur, Rabenseifner & Gropp 2005): all-reduce 2(p-1)/p; all-gather, reduce-scatter, all-to-all
    (p-1)/p; broadcast, send/recv (and halo, a neighbour send/recv) 1.
  steps: ring algorithms, strategies.md §2.2: all-reduce 2(p-1), all-gather/reduce-scatter/all-to-all
    (pairwise) p-1, broadcast as a pipelined ring/chain p-1, point-to-point 1.
  inter-node steps: NCCL's ring latency, microbenchmarks.md §4.2: nInterSteps = 2(nNodes-1) for
    all-reduce, nNodes-1 otherwise; a point-to-point exchange spanning nodes has 1 inter-node step.
  alpha(p) = a0 + a1 * steps (+ a2 * inter-steps): microbenchmarks.md §4.4 step 6 (nccl-tests#123 fit
    alpha ~ 5.6 us + 1.98 us * 2(n-1)).
  tree all-reduce: NCCL's latency baseLat + 2((nRanks/nNodes - 1) intraLat + log2(nNodes) interLat)
    (microbenchmarks.md §4.2), with the ring's bandwidth (NCCL: tree algbw = 0.5 busBw, ring p/(2(p-1))
    busBw, equal for large p). NCCL takes the faster algorithm; so does the extrapolation.
"""
from __future__ import annotations

import math

from profiler.errors import UserError

POINT_TO_POINT = ("sendrecv", "halo")
_PAIRWISE = ("allgather", "reduce_scatter", "alltoall", "broadcast")


def _check(op: str) -> None:
    if op != "allreduce" and op not in _PAIRWISE and op not in POINT_TO_POINT:
        raise UserError(f"unknown collective {op!r}; known: allreduce, {', '.join(_PAIRWISE + POINT_TO_POINT)}")


def bus_factor(op: str, group_size: int) -> float:
    """busbw / algbw (microbenchmarks.md §1.2): T = alpha + S * bus_factor / bus_bandwidth."""
    _check(op)
    p = group_size
    if op == "allreduce":
        return 2.0 * (p - 1) / p
    if op in ("allgather", "reduce_scatter", "alltoall"):
        return (p - 1) / p
    return 1.0


def latency_steps(op: str, group_size: int, nodes: int = 1) -> tuple[int, int]:
    """(intra-node steps, inter-node steps) of the ring algorithm for `op` on p ranks over `nodes` nodes."""
    _check(op)
    p = group_size
    if op in POINT_TO_POINT:
        total, inter = 1, (1 if nodes > 1 else 0)
    elif op == "allreduce":
        total, inter = 2 * (p - 1), 2 * (nodes - 1)
    else:
        total, inter = p - 1, nodes - 1
    return total - inter, inter


def tree_latency_steps(op: str, group_size: int, nodes: int = 1) -> tuple[int, int] | None:
    """(intra, inter) latency steps of NCCL's tree all-reduce, or None for ops without a tree algorithm."""
    _check(op)
    if op != "allreduce":
        return None
    per_node = max(group_size // max(nodes, 1), 1)
    return 2 * (per_node - 1), 2 * math.ceil(math.log2(nodes)) if nodes > 1 else 0
