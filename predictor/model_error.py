"""The model's own error on measured runs, as prediction intervals that mean something.

The profile's coefficient intervals say how well the microbenchmarks were fitted, not how well a whole step is
predicted. From residuals r = log(measured / predicted) of runs the model was not fitted to, the interval is
symmetric in log space, q = quantile(|r|, coverage) per "strategy/*" (at least `min_rows` runs) and "*"
(error_quantiles); predictor.api.predict widens an interval to at least that. Symmetric and per strategy only,
because the sign of the error does not carry from one cluster to another
(docs/decisions/2026-12-05-symmetric-intervals.md). Whether such an interval holds on runs it has not seen is
measured (held_out_coverage: quantiles without one group of runs at a time). docs/method.md §21.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import NamedTuple, Sequence

MIN_ROWS = 10


class Residual(NamedTuple):
    strategy: str
    framework: str
    group: str  # what runs are held out together: the model of a validate run, the source of a published row
    log_ratio: float  # log(measured / predicted)


def error_quantiles(residuals: Sequence[tuple], coverage: float = 0.8, min_rows: int = MIN_ROWS
                    ) -> dict[str, tuple[float, float]]:
    """(-q, q) with q the `coverage` quantile of |log(measured / predicted)| (module docstring), per key
    "strategy/*" with at least min_rows rows, and "*" over all of them. Each residual is (strategy, framework,
    ..., log_ratio): the first and the last fields are read (the framework names no key: see the module
    docstring)."""
    import numpy as np

    groups: dict[str, list[float]] = {"*": []}
    for r in residuals:
        strategy, value = r[0], abs(r[-1])
        for key in (f"{strategy}/*", "*"):
            groups.setdefault(key, []).append(value)
    out = {}
    for key, v in groups.items():
        if len(v) >= min_rows or key == "*" and v:
            q = float(np.quantile(v, coverage))
            out[key] = (-q, q)
    return out


def bounds_for(quantiles: dict[str, tuple[float, float]], strategy: str, framework: str) -> tuple[float, float]:
    """The most specific key's (low, high) log-ratio bounds (the "*" key is always there)."""
    return next(quantiles[k] for k in (f"{strategy}/{framework}", f"{strategy}/*", "*") if k in quantiles)


def held_out_coverage(residuals: Sequence[Residual], coverage: float = 0.8, min_rows: int = MIN_ROWS) -> dict:
    """Share of runs inside the interval learned without their group (module docstring), overall, per strategy
    and per group; groups whose runs are all there is are skipped (nothing to learn from)."""
    by_group: dict[str, list[Residual]] = defaultdict(list)
    for r in residuals:
        by_group[r.group].append(r)
    hits: list[tuple[Residual, bool]] = []
    per_group = {}
    for group, mine in sorted(by_group.items()):
        others = [r for r in residuals if r.group != group]
        if not others:
            continue
        q = error_quantiles(others, coverage, min_rows)
        inside = []
        for r in mine:
            low, high = bounds_for(q, r.strategy, r.framework)
            inside.append(low <= r.log_ratio <= high)
            hits.append((r, inside[-1]))
        per_group[group] = {"runs": len(inside), "share_inside": sum(inside) / len(inside)}
    per_strategy: dict[str, list[bool]] = defaultdict(list)
    for r, hit in hits:
        per_strategy[r.strategy].append(hit)
    return {"nominal": coverage, "runs": len(hits),
            "share_inside": sum(h for _, h in hits) / len(hits) if hits else None,
            "by_strategy": {s: {"runs": len(v), "share_inside": sum(v) / len(v)} for s, v in sorted(per_strategy.items())},
            "by_group": per_group}


def in_sample_coverage(residuals: Sequence[Residual], quantiles: dict[str, tuple[float, float]]) -> float | None:
    """Share of the runs inside the interval their own quantiles give (close to nominal by construction)."""
    if not residuals:
        return None
    inside = 0
    for r in residuals:
        low, high = bounds_for(quantiles, r.strategy, r.framework)
        inside += low <= r.log_ratio <= high
    return inside / len(residuals)


def log_ratio(measured_s: float, predicted_s: float) -> float:
    return math.log(measured_s / predicted_s)
