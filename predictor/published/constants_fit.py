"""Fit the per-GPU-family constants of calibrate.system_constants to single-node published runs.

A single-node record's analytical time is linear in its family's constants, T = a_d (F + M) + g_d G + X + R, each
part read off the analytical model by switching one on at a time (`ScaledCostModel`); the constants minimise the
squared relative error within physical bounds, with a weak pull towards the datasheet, and the software stacks'
factors are fitted with them by alternation. Families or stacks with fewer than MIN_ROWS rows are not fitted (the
fleet's constants; a factor of 1). `python -m predictor.published.fit` fits on every source and writes
predictor/data/system_constants.yaml; `predictor.published.loso` refits without each source in turn; both use
`Decompositions`. The terms, bounds and why these two constants and no more:
docs/decisions/2026-12-01-system-constants.md ("The fit"), 2026-12-01-software-stacks.md.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable, NamedTuple, Optional, Sequence

import numpy as np

from calibrate import shapes
from calibrate.system_constants import StackScales, SystemConstants, for_family, precision_class
from predictor.layercost import DTYPE_NAMES
from predictor.published.rowmap import Setup

MIN_ROWS = 4
BOUNDS = {"a": (0.2, 20.0), "g": (0.2, 50.0)}
STACK_BOUNDS = (0.2, 5.0)
STACK_ITERATIONS = 50  # alternations of the family and the stack fits (converges in a few)
PRIOR_WEIGHT = 0.05  # relative weight of the pull towards the datasheet, per parameter


class ScaledCostModel:
    """A CostModel whose GEMM/conv times are multiplied by flops_scale[dtype], memory-bound layer times by
    bytes_scale[dtype], and whose framework time per layer and pass is per_layer_s (module docstring)."""

    def __init__(self, cost_model, flops_scale: dict[str, float], bytes_scale: dict[str, float], per_layer_s: float,
                 grouped_scale: Optional[dict[str, float]] = None, memory_scale: float = 1.0,
                 stacks: Optional[StackScales] = None, matmul_scale: float = 1.0, host_floor: bool = True):
        self._cm = cost_model
        self.host_floor = host_floor  # False in decompose's parts: a floor is not linear in the scales (R holds it)
        self.stacks = stacks
        self.memory_scale = memory_scale
        self.matmul_scale = matmul_scale  # 1: matrix products as the profile costs them; 0 in decompose's parts
        self.flops_scale, self.bytes_scale, self.per_layer_s = flops_scale, bytes_scale, per_layer_s
        self.grouped_scale = flops_scale if grouped_scale is None else grouped_scale

    def __getattr__(self, name):
        return getattr(self._cm, name)

    def compute_time_s(self, op, pass_, params, dtype):
        t = self._cm.compute_time_s(op, pass_, params, dtype)
        if op in shapes.MATMUL_OPS:  # at the measured GEMM fraction: the family scales are the convolutions'
            return t * self.matmul_scale
        if op not in shapes.FLOP_OPS:
            table = self.bytes_scale
        else:
            table = self.grouped_scale if int(params.get("groups", 1)) > 1 else self.flops_scale
        return t * table.get(dtype, 1.0)

    def framework_overhead_s(self, pass_):
        return self.per_layer_s

    def host_dispatch_s(self, pass_):
        return self._cm.host_dispatch_s(pass_) if self.host_floor else 0.0

    def stack_time_scale(self, stack, dtype):
        return self.stacks.factor(stack, dtype) if self.stacks is not None else 1.0

    def memory_time_s(self, bytes_moved, *, where="device"):
        return self.memory_scale * self._cm.memory_time_s(bytes_moved, where=where)

    def at_bound(self, bound):
        return ScaledCostModel(self._cm.at_bound(bound), self.flops_scale, self.bytes_scale, self.per_layer_s,
                               self.grouped_scale, self.memory_scale, self.stacks, self.matmul_scale)


def with_constants(cost_model, constants: Optional[SystemConstants], stacks: Optional[StackScales] = None):
    """The cost model with a family's constants and the stacks' factors applied (unchanged when the family has
    no constants: the stack factors are relative to fitted family scales, as calibrate.published renders them)."""
    if constants is None:
        return cost_model
    return ScaledCostModel(cost_model, constants.flops_time_scale, constants.bytes_time_scale, constants.per_layer_s,
                           {**constants.flops_time_scale, **constants.grouped_time_scale}, stacks=stacks)


def decompose(setup: Setup, predictor, base_cost_model) -> dict[str, float]:
    """F, G, M and R of one record (module docstring) under the datasheet cost model."""
    d = DTYPE_NAMES[setup.dtype]
    base = predictor.predict(setup, base_cost_model)
    only = lambda a, g, b: predictor.predict(
        setup, ScaledCostModel(base_cost_model, {d: a}, {d: b}, 0.0, {d: g}, memory_scale=0.0,
                               matmul_scale=0.0, host_floor=False)).terms["compute_s"]
    parts = {"F": only(1.0, 0.0, 0.0), "G": only(0.0, 1.0, 0.0), "M": only(0.0, 0.0, 1.0)}
    # X: the matrix products (at the measured GEMM fraction: no family constant, the stack's factor applies)
    parts["X"] = predictor.predict(setup, ScaledCostModel(base_cost_model, {d: 0.0}, {d: 0.0}, 0.0, {d: 0.0},
                                                          memory_scale=0.0, host_floor=False)).terms["compute_s"]
    # R: everything neither scales (update, copies such as concat, exposed communication)
    return parts | {"R": base.predicted_s - sum(parts.values()), "dtype": d}


def fit_family(rows: Sequence[tuple[dict, float]], family: str, ids: Sequence[str], sources: Iterable[str]
               ) -> Optional[SystemConstants]:
    """Constants of one family from (decomposition, measured seconds) pairs; None below MIN_ROWS rows."""
    if len(rows) < MIN_ROWS:
        return None
    dtypes = sorted({parts["dtype"] for parts, _ in rows})
    grouped = sorted({parts["dtype"] for parts, _ in rows if parts["G"] > 0})
    names = [("a", d) for d in dtypes] + [("g", d) for d in grouped]
    A = np.zeros((len(rows) + len(names), len(names)))
    y = np.zeros(len(rows) + len(names))
    for i, (parts, measured) in enumerate(rows):
        A[i, names.index(("a", parts["dtype"]))] = (parts["F"] + parts["M"]) / measured
        if parts["G"] > 0:
            A[i, names.index(("g", parts["dtype"]))] = parts["G"] / measured
        y[i] = 1.0 - (parts["R"] + parts.get("X", 0.0)) / measured
    for j in range(len(names)):  # the pull scales with the column, so it is equally weak for every constant
        weight = PRIOR_WEIGHT * float(np.sqrt(np.mean(A[: len(rows), j] ** 2)))
        A[len(rows) + j, j] = weight
        y[len(rows) + j] = weight
    from scipy.optimize import lsq_linear

    lower = [BOUNDS[k][0] for k, _ in names]
    upper = [BOUNDS[k][1] for k, _ in names]
    x = lsq_linear(A, y, bounds=(lower, upper)).x
    value = dict(zip(names, x))
    return SystemConstants(
        family=family, flops_time_scale={d: round(float(value[("a", d)]), 4) for d in dtypes},
        grouped_time_scale={d: round(float(value[("g", d)]), 4) for d in grouped},
        bytes_time_scale={d: round(float(value[("a", d)]), 4) for d in dtypes},
        rows=len(rows), fitted_sources=tuple(sorted(set(sources))),
        row_ids=tuple(ids))


class Fitted(NamedTuple):
    families: dict[str, SystemConstants]
    stacks: StackScales


def _compute_part(constants: Optional[SystemConstants], parts: dict) -> float:
    """a (F + M) + g G of one record under its family's constants (the datasheet's 1 without them)."""
    x = parts.get("X", 0.0)
    if constants is None:
        return parts["F"] + parts["M"] + parts["G"] + x
    d = parts["dtype"]
    a = constants.flops_time_scale.get(d, 1.0)
    return a * (parts["F"] + parts["M"]) + constants.grouped_time_scale.get(d, a) * parts["G"] + x


def _stack_factor(rows: Sequence[tuple[float, float, float]]) -> float:
    """argmin_s sum(((s C + R - m) / m)^2) + (w (s - 1))^2 over (C, R, m) rows, within STACK_BOUNDS: the closed
    form of the one-parameter least squares, with the same weak pull towards 1 as the family constants."""
    c = np.array([r[0] / r[2] for r in rows])
    y = np.array([1.0 - r[1] / r[2] for r in rows])
    w2 = (PRIOR_WEIGHT * float(np.sqrt(np.mean(c ** 2)))) ** 2
    return float(np.clip((c @ y + w2) / (c @ c + w2), *STACK_BOUNDS))


def _families(items, stack_of, scale: dict) -> dict[str, SystemConstants]:
    """Family constants with each record's compute parts multiplied by its stack's factor."""
    by_family: dict[str, list] = defaultdict(list)
    for (setup, family, parts), key in zip(items, stack_of):
        f = scale.get(key, 1.0)
        by_family[family].append((setup, parts | {"F": f * parts["F"], "M": f * parts["M"], "G": f * parts["G"],
                                                   "X": f * parts.get("X", 0.0)}))
    out = {}
    for family, rows in sorted(by_family.items()):
        fitted = fit_family([(parts, s.run.measured_s) for s, parts in rows], family,
                            [s.run.id for s, _ in rows], [s.run.source for s, _ in rows])
        if fitted is not None:
            out[family] = fitted
    return out


def single_node(setup: Setup) -> bool:
    return setup.run.nodes == 1


class Decompositions:
    """Decompositions of the single-node records, computed once and reused by every refit."""

    def __init__(self, setups: Sequence[Setup], predictor, base: dict):
        """base: profile file -> (datasheet cost model, GPU family), as predictor.published.loso.base_cost_models."""
        self.items: list[tuple[Setup, str, dict]] = []
        for setup in setups:
            if not single_node(setup) or setup.profile not in base:
                continue
            cm, family = base[setup.profile]
            self.items.append((setup, family, decompose(setup, predictor, cm)))

    def fit(self, exclude_source: Optional[str] = None) -> Fitted:
        """Family constants and stack factors from every record not of `exclude_source` (module docstring)."""
        items = [(s, family, parts) for s, family, parts in self.items if s.run.source != exclude_source]
        stack_of = [(s.stack, precision_class(parts["dtype"])) for s, _, parts in items]
        counts = Counter(stack_of)
        fitted = sorted(k for k, n in counts.items() if n >= MIN_ROWS and k[0] != "other")
        scale = {k: 1.0 for k in fitted}
        families = _families(items, stack_of, scale)
        names = {f for _, f, _ in items}
        for _ in range(STACK_ITERATIONS):
            complete = {f: for_family(families, f) for f in names}  # each family completed from the fleet once
            new = {k: _stack_factor([(_compute_part(complete[f], parts), parts["R"], s.run.measured_s)
                                     for (s, f, parts), key in zip(items, stack_of) if key == k]) for k in fitted}
            for cls in {k[1] for k in new}:  # the reference: per precision class, the row-weighted geometric
                keys = [k for k in new if k[1] == cls]  # mean of the stacks' factors is 1 (the family scales and
                mean_log = sum(counts[k] * np.log(new[k]) for k in keys) / sum(counts[k] for k in keys)  # the
                new.update({k: new[k] / float(np.exp(mean_log)) for k in keys})  # factors share that level)
            converged = all(abs(new[k] - scale[k]) < 1e-5 for k in fitted)
            scale = new
            families = _families(items, stack_of, scale)
            if converged:
                break
        table: dict[str, dict[str, float]] = defaultdict(dict)
        for (stack, cls), v in scale.items():
            table[stack][cls] = round(float(v), 4)
        rows = sum(counts[k] for k in fitted)
        sources = sorted({s.run.source for (s, _, _), key in zip(items, stack_of) if key in scale})
        return Fitted(families, StackScales(dict(table), rows, tuple(sources)))
