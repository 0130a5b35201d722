"""The at-scale coefficients of a calibration (docs/method.md §6, §19a, §25): the spread of its step and collective
times (calibrate.spread), the background load of its fabric from collectives repeated over time
(calibrate.fabric.fit_background_load, `profiler calibrate --repeat-over`), and its storage (calibrate.storage_fit).

Collective samples of a repeated sweep carry their round in `extra["round"]`: the alpha-beta fits take, per
point, the quietest round (the smallest median time: the fabric as free as it was seen), the background load all
of them.
"""
from __future__ import annotations

import json
from typing import Optional, Sequence

import numpy as np

from calibrate.collective_fit import group_of, size_of
from calibrate.fabric import fit_background_load
from calibrate.spread import fit_spread
from calibrate.storage_fit import fit_storage
from profiler.profile import Sample


def round_of(sample: Sample) -> Optional[int]:
    value = sample.extra.get("round")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _point(sample: Sample) -> tuple:
    return sample.benchmark, sample.variant, json.dumps(sample.params, sort_keys=True, default=str)


def quietest_rounds(samples: Sequence[Sample]) -> list[Sample]:
    """The samples with every repeated point (several rounds) reduced to its quietest round's sample."""
    best: dict[tuple, Sample] = {}
    out: list[Sample] = []
    for s in samples:
        if round_of(s) is None:
            out.append(s)
            continue
        key = _point(s)
        if key not in best or np.median(s.times_s) < np.median(best[key].times_s):
            best[key] = s
    return out + list(best.values())


def round_times(samples: Sequence[Sample]) -> dict:
    """(op, group size, nodes, size bytes) -> {round: median time} of the repeated collective samples."""
    by_variant: dict = {}
    for s in samples:
        k = round_of(s)
        if k is None:
            continue
        size, nodes = group_of(s)
        by_variant.setdefault(s.variant, {}).setdefault((s.benchmark, size, nodes, size_of(s)), {})[k] = \
            float(np.median(s.times_s))
    # one timing variant: the throughput one (back-to-back calls, the bandwidth regime) where it was measured
    return by_variant.get("throughput") or next(iter(by_variant.values()), {})


def at_scale_fields(by_kind: dict, device_is_host: bool) -> dict:
    """Coefficients fields: `spread` (step and collective spread from the samples' calls; the sourced device
    spread on a GPU profile) and `storage` (when the storage section ran)."""
    fields = {"spread": fit_spread([s.times_s for s in by_kind.get("compute", [])],
                                   [s.times_s for s in quietest_rounds(by_kind.get("collectives", []))],
                                   on_gpu=not device_is_host)}
    if by_kind.get("storage"):
        fields["storage"] = fit_storage(by_kind["storage"])
    return fields


def set_background_load(coefficients, collective_samples: Sequence[Sample]) -> None:
    """The fitted fabric's background load, measured from repeated inter-leaf rounds (the collective fits took each
    point's quietest round, so the load is relative to it). Without repeated rounds none: the fitted collectives
    hold whatever load the fabric had while they ran, and a default on top would count it twice (a note says how to
    measure it). Nothing without a fitted fabric."""
    fabric = coefficients.fabric
    if fabric is None:
        return
    fabric.background_load = fit_background_load(round_times(collective_samples), fabric.nodes_per_leaf)
    if fabric.background_load is None:
        coefficients.notes.append("fabric: other jobs' load not measured (the collectives hold the load of their "
                                  "moment); `profiler calibrate --only collectives --repeat-over MINUTES` measures it")
