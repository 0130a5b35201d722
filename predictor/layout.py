"""Device layout: which ranks form each group and how many nodes a group spans.

Ranks are numbered node by node (devices_per_node consecutive ranks per node). A plan's inner
model-parallel group is `inner` consecutive ranks (inside one node when it fits, as ParaDL maps df/ds,
docs/method.md §7); the data-parallel group takes one rank from each inner group (stride `inner`).
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)
def nodes_spanned(size: int, stride: int, devices_per_node: int, groups: int) -> int:
    """Most nodes any of the `groups` groups spans; group g holds ranks start_g + k*stride, k < size.

    Contiguous groups (stride 1) start at g*size; strided groups (stride = inner size) start at g."""
    if size <= 1:
        return 1
    worst = 1
    for g in range(groups):
        start = g * size if stride == 1 else g
        if stride >= devices_per_node:  # each step lands on a later node
            return size
        # steps shorter than a node advance the node by 0 or 1, so every node between first and last is hit
        worst = max(worst, (start + (size - 1) * stride) // devices_per_node - start // devices_per_node + 1)
    return worst


def inner_nodes(inner: int, p_data: int, devices_per_node: int) -> int:
    return nodes_spanned(inner, 1, devices_per_node, min(p_data, devices_per_node))


def data_nodes(p_data: int, inner: int, devices_per_node: int) -> int:
    return nodes_spanned(p_data, inner, devices_per_node, min(inner, devices_per_node))


def data_network_share(p_data: int, inner: int, devices_per_node: int) -> float:
    """Share of each node's inter-node network one data-parallel group gets. Its ranks are every `inner`-th rank,
    so a node's devices belong to c = min(inner, devices_per_node) groups, which all-reduce their gradients at the
    same time; each crosses the node's NICs once per ring (NCCL's busbw of a ring is its slowest link), so the c
    rings split the node's network evenly: 1/c when the group spans several nodes, 1 inside one node. With c = 8
    on a node of 8 NICs that is one NIC per group (8 x 24 = 192 GB/s busbw on DGX A100), on a node of one NIC an
    eighth of it each."""
    if inner <= 1 or data_nodes(p_data, inner, devices_per_node) <= 1:
        return 1.0
    return 1.0 / min(inner, devices_per_node)
