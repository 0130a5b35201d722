"""Fit the fabric (leaf size, over-subscription, uncontended inter-node bus bandwidth) from all-reduce measured
at several node counts, so larger allocations follow calibrate.fabric's contention model.

Each (group size, node count) fit gives the bus bandwidth B(N) the job saw; B(N) = B_inter / contention(N) is
fitted over a grid of leaf sizes and over-subscriptions by least squared log error, a leaf size kept only when it
lowers the error by more than the measurements' spread (`MIN_GAIN`), so a flat curve keeps "one switch"; the
node counts must cross a leaf boundary for it to be seen. docs/calibration.md ("Fabric");
docs/decisions/2026-12-01-fabric-fit.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from calibrate.coefficients import CollectiveFit, Estimate, Fabric
from calibrate.fabric import contention

RATIOS = np.round(np.arange(1.0, 16.0001, 0.05), 2)
MIN_GAIN = 0.5   # a leaf must remove at least half of the no-contention squared log error
DRAWS = 200


@dataclass(frozen=True)
class FabricFit:
    nodes_per_leaf: Optional[int]
    oversubscription: Estimate
    inter_bus_bandwidth_bytes_per_s: Estimate
    node_counts: tuple[int, ...]
    note: str


def _search(nodes: np.ndarray, bw: np.ndarray, leaves) -> tuple[Optional[int], float, float, float]:
    """(leaf, ratio, B_inter, squared log error) of the best (leaf, over-subscription) over `leaves` x RATIOS;
    B_inter is the geometric mean of B(N) * contention(N), ratio 1 being no contention."""
    log_bw = np.log(bw)
    best = (None, 1.0, float(np.exp(log_bw.mean())), float(((log_bw - log_bw.mean()) ** 2).sum()))
    for leaf in leaves:
        for ratio in RATIOS:
            level = log_bw + np.log([contention(int(n), leaf, float(ratio)) for n in nodes])
            err = float(((level - level.mean()) ** 2).sum())
            if err < best[3]:
                best = (leaf, float(ratio), float(np.exp(level.mean())), err)
    return best


def _best(nodes: np.ndarray, bw: np.ndarray) -> tuple[Optional[int], float, float, float]:
    """The best candidate over every leaf size below the largest node count, or no leaf (one switch) unless a
    leaf removes more than MIN_GAIN of the no-contention error."""
    flat = _search(nodes, bw, ())
    best = _search(nodes, bw, range(1, int(nodes.max())))
    return flat if best[0] is None or best[3] > (1.0 - MIN_GAIN) * flat[3] else best


def fit_fabric(fits: Sequence[CollectiveFit], rng: np.random.Generator, rails_per_node: int = 1
               ) -> Optional[FabricFit]:
    """The fabric from multi-node allreduce fits at >= 3 distinct node counts, else None."""
    multi = [f for f in fits if f.op == "allreduce" and f.nodes > 1]
    if len({f.nodes for f in multi}) < 3:
        return None
    nodes = np.array([f.nodes for f in multi])
    bw_est = [f.segments[-1].bandwidth_bytes_per_s for f in multi]
    leaf, ratio, b_inter, _ = _best(nodes, np.array([e.value for e in bw_est]))
    ratios, bws = [], []
    for _ in range(DRAWS):
        drawn = np.array([rng.uniform(min(e.low, e.value), max(e.high, e.value)) for e in bw_est])
        _, r, b, _ = _best(nodes, drawn) if leaf is None else _search(nodes, drawn, (leaf,))
        ratios.append(r)
        bws.append(b)
    lo_r, hi_r = np.quantile(ratios, [0.025, 0.975])
    lo_b, hi_b = np.quantile(bws, [0.025, 0.975])
    counts = tuple(sorted({int(n) for n in nodes}))
    note = (f"fabric fitted from allreduce at {len(counts)} node counts ({', '.join(map(str, counts))}): "
            + (f"{leaf} nodes per leaf, over-subscription {ratio:.2f}" if leaf else "no contention seen (one switch)"))
    return FabricFit(nodes_per_leaf=leaf,
                     oversubscription=Estimate(value=ratio, low=min(lo_r, ratio), high=max(hi_r, ratio)),
                     inter_bus_bandwidth_bytes_per_s=Estimate(value=b_inter, low=min(lo_b, b_inter), high=max(hi_b, b_inter)),
                     node_counts=counts, note=note)


def uncontended_links(links: dict, fits: Sequence[CollectiveFit], fabric: FabricFit) -> dict:
    """Inter-node links whose bus bandwidth is the one inside a leaf: each op's measured bandwidth (that of its
    largest group, collective_fit._inter_link) times the contention that group paid; allreduce takes the
    fabric fit's B_inter directly."""
    out = {}
    for op, levels in links.items():
        inter = levels.get("inter")
        if inter is None:
            out[op] = levels
            continue
        if op == "allreduce":
            bw = fabric.inter_bus_bandwidth_bytes_per_s
        else:
            largest = max((f for f in fits if f.op == op and f.nodes > 1), key=lambda f: (f.nodes, f.group_size))
            c = contention(largest.nodes, fabric.nodes_per_leaf, fabric.oversubscription.value)
            e = inter.bus_bandwidth_bytes_per_s
            bw = Estimate(value=e.value * c, low=e.low * c, high=e.high * c)
        out[op] = {**levels, "inter": inter.model_copy(update={
            "bus_bandwidth_bytes_per_s": bw, "sources": inter.sources + [f"uncontended: {fabric.note}"]})}
    return out


def as_fabric(fit: FabricFit, rails_per_node: int) -> Fabric:
    return Fabric(rails_per_node=rails_per_node, nodes_per_leaf=fit.nodes_per_leaf,
                  oversubscription=fit.oversubscription.value, sources=[fit.note])
