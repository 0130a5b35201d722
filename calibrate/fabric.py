"""Contention on the inter-node fabric: how much a collective spanning several leaf switches slows down.

A profile may describe the network above its nodes (`Coefficients.fabric`: `nodes_per_leaf`, uplinks at
1/`oversubscription` of the downlinks). A collective over N nodes on L leaves sends 1 - 1/L of its bytes out
of its leaf, so every flow slows by contention(N, load) = max(1, (1 - 1/L) * oversubscription / (1 - load)),
`load` the uplink share other jobs take: our model, an upper bound on what placement and routing can cost,
which a calibration over several node counts replaces. The load is a distribution over time
(Fabric.background_load: quiet, typical, busy); `load_at` reads any percentile, `fit_background_load` fits it
from inter-leaf collectives repeated over time. docs/method.md §6 ("Fabric contention", "Other jobs on the
fabric"); docs/decisions/2026-12-06-cluster-load.md.
"""
from __future__ import annotations

import math
from typing import Optional


def leaves_spanned(nodes: int, nodes_per_leaf: Optional[int]) -> int:
    """Leaf switches a job on `nodes` consecutive nodes touches (1 when the leaf size is unknown)."""
    if not nodes_per_leaf or nodes <= 1:
        return 1
    return math.ceil(nodes / nodes_per_leaf)


def contention(nodes: int, nodes_per_leaf: Optional[int], oversubscription: float, load: float = 0.0) -> float:
    """Slowdown >= 1 of inter-node bandwidth for a collective over `nodes` nodes while other jobs take a share
    `load` of the uplinks (module docstring)."""
    leaves = leaves_spanned(nodes, nodes_per_leaf)
    if leaves <= 1:
        return 1.0
    return max(1.0, (1.0 - 1.0 / leaves) * oversubscription / (1.0 - min(max(load, 0.0), MAX_LOAD)))


#: the largest share of the uplinks other jobs may be taken to hold (the job keeps at least 5% of them)
MAX_LOAD = 0.95
#: the percentiles the named cluster loads stand for (`predictor run --cluster-load`)
LOAD_PERCENTILES = {"quiet": 5.0, "typical": 50.0, "busy": 95.0}


def load_at(background, percentile: float) -> float:
    """The share of the uplinks other jobs take at `percentile` (0-100) of a BackgroundLoad: linear between its
    quiet (5), typical (50) and busy (95) figures, held beyond them; 0 without a background load."""
    if background is None:
        return 0.0
    points = [(LOAD_PERCENTILES["quiet"], background.quiet), (LOAD_PERCENTILES["typical"], background.typical),
              (LOAD_PERCENTILES["busy"], background.busy)]
    if percentile <= points[0][0]:
        return points[0][1]
    for (p0, v0), (p1, v1) in zip(points, points[1:]):
        if percentile <= p1:
            return v0 + (v1 - v0) * (percentile - p0) / (p1 - p0)
    return points[-1][1]


def parse_cluster_load(text: str) -> float:
    """A --cluster-load value as a percentile: quiet, typical, busy, or a number 0-100 (a trailing % allowed);
    ValueError otherwise."""
    word = str(text).strip().lower()
    if word in LOAD_PERCENTILES:
        return LOAD_PERCENTILES[word]
    number = float(word.removesuffix("%"))
    if not (0.0 <= number <= 100.0):
        raise ValueError(f"{text}: a percentile must lie in 0..100")
    return number


#: the background load of a shared fabric when nothing was measured (published profiles, calibrations without
#: --repeat-over): ParaDL's ABCI observation that congestion outliers push the average communication up to 4x its
#: expected value is the busy end, 1 / (1 - 0.75) = 4; typical is the geometric middle of 1x..4x, 2x (load 0.5),
#: assumed; quiet is a fabric no other job uses
DEFAULT_BACKGROUND = {"quiet": 0.0, "typical": 0.5, "busy": 0.75,
                      "sources": ["busy: ParaDL (Kahira et al., HPDC'21, arXiv 2104.09075) on ABCI, 'congestion "
                                  "outliers push average communication up to 4x the expected value' (as quoted in "
                                  "issue 38): 1 / (1 - 0.75) = 4; typical: assumed, the geometric middle of 1x-4x "
                                  "(2x, load 0.5); quiet: no other job"]}


def default_background():
    from calibrate.coefficients import BackgroundLoad
    return BackgroundLoad(**DEFAULT_BACKGROUND)


def fit_background_load(round_times: dict, nodes_per_leaf: Optional[int]):
    """A BackgroundLoad from repeated rounds of inter-leaf collectives, or None when none were repeated.

    round_times: (op, group size, nodes, size bytes) -> {round: median time of that round's calls}. Only groups
    spanning more than one leaf (more than `nodes_per_leaf` nodes; any multi-node group when the leaf size is
    unknown) and the two largest message sizes of each (the bandwidth regime) count. Each round's slowdown is its
    time over the fastest round's, s_k (the median over the points); the fastest round is taken as quiet, and a
    round slowed by s_k left the job 1/s_k of the uplinks: load_k = 1 - 1/s_k. quiet, typical and busy are the 5th,
    50th and 95th percentiles of load_k."""
    import numpy as np

    from calibrate.coefficients import BackgroundLoad

    by_group: dict = {}
    for (op, group, nodes, size), rounds in round_times.items():
        if nodes < 2 or len(rounds) < 2 or (nodes_per_leaf and nodes <= nodes_per_leaf):
            continue
        by_group.setdefault((op, group, nodes), []).append((size, rounds))
    slowdowns: dict[int, list[float]] = {}
    for points in by_group.values():
        for _size, rounds in sorted(points, key=lambda item: item[0])[-2:]:
            fastest = min(rounds.values())
            for k, t in rounds.items():
                slowdowns.setdefault(k, []).append(t / fastest)
    if len(slowdowns) < 2:
        return None
    loads = [1.0 - 1.0 / float(np.median(s)) for _, s in sorted(slowdowns.items())]
    quiet, typical, busy = (float(min(v, MAX_LOAD)) for v in np.percentile(loads, [5, 50, 95]))
    return BackgroundLoad(quiet=quiet, typical=typical, busy=busy, rounds=len(loads),
                          sources=[f"measured: {len(loads)} rounds of inter-leaf collectives ({len(by_group)} "
                                   "groups, their two largest sizes); load = 1 - fastest round / round time, "
                                   "percentiles 5, 50, 95 (calibrate.fabric.fit_background_load)"])
