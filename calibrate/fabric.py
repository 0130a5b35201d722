"""Contention on the inter-node fabric: how much a collective spanning several leaf switches slows down.

A profile may describe the network above its nodes (`Coefficients.fabric`): `nodes_per_leaf` nodes share one
leaf switch with full bisection among them, and the leaf's uplinks carry 1/`oversubscription` of its
downlink bandwidth (ABCI 1.0: 34 nodes per leaf, 1:3 to the spine).

Model (ours; an upper bound on what placement and routing can cause): a collective over N nodes spread over
L = ceil(N / nodes_per_leaf) leaves, each node injecting at its full rate with its flows spread evenly over
the other nodes (hashed routing, several jobs), sends a share f = 1 - 1/L of its bytes out of its leaf. The
leaf's uplinks are then loaded f * oversubscription times their capacity, so every flow slows by

    contention(N) = max(1, (1 - 1/L) * oversubscription)

which is 1 inside one leaf and tends to the over-subscription ratio on many leaves. A ring placed leaf by
leaf crosses leaf boundaries far less; the factor is what an unlucky placement pays, and the calibration of a
real cluster (measured group sizes over several node counts) replaces it.
"""
from __future__ import annotations

import math
from typing import Optional


def leaves_spanned(nodes: int, nodes_per_leaf: Optional[int]) -> int:
    """Leaf switches a job on `nodes` consecutive nodes touches (1 when the leaf size is unknown)."""
    if not nodes_per_leaf or nodes <= 1:
        return 1
    return math.ceil(nodes / nodes_per_leaf)


def contention(nodes: int, nodes_per_leaf: Optional[int], oversubscription: float) -> float:
    """Slowdown >= 1 of inter-node bandwidth for a collective over `nodes` nodes (module docstring)."""
    leaves = leaves_spanned(nodes, nodes_per_leaf)
    return max(1.0, (1.0 - 1.0 / leaves) * oversubscription)
