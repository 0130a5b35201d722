"""Collective algorithm formulas: bus-bandwidth factors and latency step counts per operation, intra- and
inter-node, and NCCL's tree all-reduce beside the ring (the faster is taken, as NCCL does).

docs/method.md §6 derives and sources each (Thakur, Rabenseifner & Gropp 2005; NCCL's src/graph/tuning.cc;
the nccl-tests#123 latency fit). The bus factors are defined once, beside each kernel (kernels.collectives),
and read from there.
"""
from __future__ import annotations

import math

from kernels.collectives import OPERATIONS
from profiler.errors import UserError

POINT_TO_POINT = ("sendrecv", "halo")
#: the all-reduce algorithms NCCL chooses among (NCCL_ALGO's names), the faster per call; NCCL before 2.4 has the ring
#: only (trees came with 2.4, Feb 2019: NVIDIA's NCCL 2.4 release notes), as has NCCL_ALGO=Ring
ALGORITHMS = ("ring", "tree")
_PAIRWISE = ("allgather", "reduce_scatter", "alltoall", "broadcast")


def _check(op: str) -> None:
    if op != "allreduce" and op not in _PAIRWISE and op not in POINT_TO_POINT:
        raise UserError(f"unknown collective {op!r}; known: allreduce, {', '.join(_PAIRWISE + POINT_TO_POINT)}")


def bus_factor(op: str, group_size: int) -> float:
    """busbw / algbw as nccl-tests defines it for `op` on `group_size` ranks (each kernel module's busbw_factor,
    kernels.collectives): T = alpha + S * bus_factor / bus_bandwidth."""
    _check(op)
    return OPERATIONS[op].busbw_factor(group_size)


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
