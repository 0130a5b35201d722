"""A scaling sweep (`predictor scale`, `predictor report`): one model on a range of device counts, under named
strategies and/or `best` (the search's fastest fitting plan at each count), with intervals, scaling
efficiency, the first count where efficiency drops below a threshold, and where the fastest strategy changes.

Weak scaling keeps the batch per device, strong scaling the global batch. Every point is evaluated with one shared
Context per coefficient bound, so the graph is traced once and per-layer costs are computed once for the whole
sweep. A named strategy's point is what `predictor run --strategy S` predicts there; `best` is what `predictor
search` ranks first at that count, under the sweep's framework, input and stack settings. Efficiency, step and
threshold as docs/planning.md ("predictor scale") defines them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

from calibrate.cost_api import CostModel
from predictor.api import default_plans, rank
from predictor.graph import ModelGraph
from predictor.plan import RUN_SETTINGS, Prediction
from predictor.search_fast import fast_search
from predictor.search_space import SEARCH_STRATEGIES, Counts, Ranking
from predictor.stacks import stack_scaled
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from profiler.errors import UserError

BEST = "best"  # the line that takes the search's fastest fitting plan at each device count
MAX_POINTS = 64  # device counts one sweep may take (a 1-2^20 range of powers of two has 21)
DEFAULT_EFFICIENCY_THRESHOLD = 0.8


def parse_gpus(text: str, max_devices: int, flag: str = "--gpus") -> tuple[int, ...]:
    """Device counts from `1,2,4,8`, a range `1-1024` (the powers of two within it) or a mix (`1,3,8-64`),
    sorted without repeats. UserError (naming `flag`) for anything else: a count outside 1..max_devices, a range
    that runs backwards or holds no power of two, more than MAX_POINTS counts."""
    text = str(text).strip()
    if not text:
        raise UserError(f"{flag}: expected counts like 1,2,4 or a range like 1-1024, got nothing")
    counts: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        low_text, dash, high_text = item.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise UserError(f"{flag} {text[:40]!r}: expected counts like 1,2,4 or a range like 1-1024") from None
        for value in (low, high):
            if not 1 <= value <= max_devices:
                raise UserError(f"{flag} {text[:40]!r}: a device count must be in 1..{max_devices}, got {value}")
        if high < low:
            raise UserError(f"{flag} {item!r}: the range runs backwards ({low} > {high})")
        if dash:
            powers = [1 << k for k in range(low.bit_length() - 1, high.bit_length()) if low <= 1 << k <= high]
            if not powers:
                raise UserError(f"{flag} {item!r}: no power of two in the range; list the counts instead (e.g. 3,5,7)")
            counts.update(powers)
        else:
            counts.add(low)
        if len(counts) > MAX_POINTS:
            raise UserError(f"{flag} {text[:40]!r}: more than {MAX_POINTS} device counts")
    return tuple(sorted(counts))


@dataclass
class Point:
    """One line's prediction at one device count (prediction None: no plan of the line fits there)."""

    devices: int
    batch: int
    prediction: Optional[Prediction]
    efficiency: Optional[float] = None  # samples/s per device over the sweep's baseline (module docstring)
    #: (low, high) efficiency with the point and the baseline at the same end of their intervals: a bias that
    #: moves every prediction alike (the model's own error) cancels, as it does in the efficiency itself
    efficiency_interval: Optional[tuple[float, float]] = None
    #: the step from the line's previous usable count: its throughput gain over the devices' gain (1.0: the added
    #: devices pay in full); what says where scaling stops paying when the baseline itself is held back
    step_efficiency: Optional[float] = None
    reason: str = ""  # why there is no prediction, or why it is infeasible

    @property
    def usable(self) -> bool:
        """Feasible and within the device memory."""
        return self.prediction is not None and self.prediction.feasible and self.prediction.fits

    @property
    def samples_per_s(self) -> Optional[float]:
        p = self.prediction
        return p.throughput_samples_per_s if p is not None and p.feasible else None

    def samples_per_s_interval(self) -> Optional[tuple[float, float]]:
        """(low, high) samples/s from the iteration interval (its high end gives the low throughput)."""
        p = self.prediction
        if p is None or not p.feasible or not all(math.isfinite(t) and t > 0 for t in p.interval_s):
            return None
        return p.plan.batch / p.interval_s[1], p.plan.batch / p.interval_s[0]


@dataclass
class Crossover:
    """Where the fastest strategy changes between two neighbouring swept counts."""

    after_devices: int  # the last count with the old winner
    at_devices: int  # the first count with the new one
    before: str  # strategy (and split) that was fastest
    after: str
    line: str  # "best" (the search's winner changes strategy) or "named" (among the named strategies)


@dataclass
class Sweep:
    """Every line's points, the baseline, threshold crossings and crossovers of one sweep."""

    model: str
    devices: tuple[int, ...]
    lines: dict[str, list[Point]]
    weak: bool
    batch_per_device: Optional[int]  # weak scaling
    global_batch: Optional[int]  # strong scaling
    threshold: float
    baseline_devices: Optional[int] = None
    baseline_samples_per_device_s: Optional[float] = None
    baseline_interval: Optional[tuple[float, float]] = None  # the baseline point's samples/s per device, low/high
    below_threshold: dict[str, Optional[int]] = field(default_factory=dict)  # line -> first count below it
    step_below_threshold: dict[str, Optional[int]] = field(default_factory=dict)  # line -> first step below it
    crossovers: list[Crossover] = field(default_factory=list)

    def last_efficient(self, line: str) -> Optional[int]:
        """The largest device count before the line first drops below the threshold, in efficiency or in a
        step's (None: no usable count)."""
        stops = [c for c in (self.below_threshold.get(line), self.step_below_threshold.get(line)) if c is not None]
        first_below = min(stops) if stops else None
        ok = [pt.devices for pt in self.lines[line] if pt.usable and pt.efficiency is not None
              and (first_below is None or pt.devices < first_below) and pt.devices >= (self.baseline_devices or 0)]
        return max(ok) if ok else None

    def to_dict(self, dataset_size: Optional[int] = None, epochs: float = 1.0,
                gpu_hour_cost: Optional[float] = None) -> dict:
        """Every field, JSON-ready (infinite times stay floats; predictor.report.finite_json nulls them)."""
        lines = {}
        for name, points in self.lines.items():
            rows = []
            for pt in points:
                row = {"devices": pt.devices, "batch": pt.batch, "efficiency": pt.efficiency,
                       "efficiency_interval": pt.efficiency_interval, "step_efficiency": pt.step_efficiency,
                       "reason": pt.reason,
                       "usable": pt.usable, "samples_per_s": pt.samples_per_s,
                       "samples_per_s_interval": pt.samples_per_s_interval(),
                       "prediction": pt.prediction.to_dict() if pt.prediction is not None else None}
                row.update(train_cost(pt, dataset_size, epochs, gpu_hour_cost))
                rows.append(row)
            lines[name] = rows
        return {"model": self.model, "devices": list(self.devices), "scaling": "weak" if self.weak else "strong",
                "batch_per_device": self.batch_per_device, "global_batch": self.global_batch,
                "efficiency_threshold": self.threshold, "baseline_devices": self.baseline_devices,
                "baseline_samples_per_device_s": self.baseline_samples_per_device_s,
                "below_threshold_at_devices": self.below_threshold,
                "step_below_threshold_at_devices": self.step_below_threshold,
                "last_efficient_devices": {name: self.last_efficient(name) for name in self.lines},
                "crossovers": [c.__dict__ for c in self.crossovers], "dataset_size": dataset_size, "epochs": epochs,
                "gpu_hour_cost": gpu_hour_cost, "lines": lines}


def train_cost(point: Point, dataset_size: Optional[int], epochs: float, gpu_hour_cost: Optional[float]) -> dict:
    """Time to train (seconds) and device-hours for `epochs` passes over `dataset_size` samples, and their cost
    at `gpu_hour_cost` per device-hour; {} without a dataset size or a feasible prediction."""
    p = point.prediction
    if not dataset_size or p is None or not p.feasible:
        return {}
    out = {"train_s": p.epoch_s(dataset_size) * epochs, "gpu_hours": p.gpu_hours(dataset_size, epochs)}
    if gpu_hour_cost is not None:
        out["cost"] = out["gpu_hours"] * gpu_hour_cost
    return out


def family(strategy: str) -> str:
    """The strategy a crossover compares: serial is data parallelism on one device (serial+recompute is
    data+recompute), so going from one device to two under data parallelism is no change of strategy."""
    return "data" + strategy[len("serial"):] if strategy.startswith("serial") else strategy


def plural(count: int, noun: str = "GPU") -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def label(pred: Prediction) -> str:
    return f"{pred.plan.strategy} ({pred.plan.describe()})"


class _Evaluator:
    """The sweep's shared contexts: value, low and high coefficient bounds, and the search's (stack-scaled)."""

    def __init__(self, graph: ModelGraph, cm: CostModel, stack: str, cap: float):
        self.graph, self.cm, self.cap = graph, cm, cap
        self.ctx = Context(graph, cm)
        self.low = Context(graph, cm.at_bound("low"))
        self.high = Context(graph, cm.at_bound("high"))
        scaled = stack_scaled(cm, stack)
        self.search_ctx = self.ctx if scaled is cm else Context(graph, scaled)

    def with_interval(self, pred: Prediction) -> Prediction:
        """The prediction's (low, high) interval as predictor.api.predict makes it, from the shared contexts."""
        if not pred.feasible:
            return pred
        low = min(evaluate(self.low, pred.plan, self.cap).iteration_s, pred.iteration_s)
        high = max(evaluate(self.high, pred.plan, self.cap).iteration_s, pred.iteration_s)
        bounds = self.cm.model_error_bounds(pred.plan.strategy, pred.plan.framework)
        if bounds is not None:  # times the at-scale terms' own range, as predict does (predictor.at_scale)
            from predictor.at_scale import at_scale_range
            lo, hi = at_scale_range(self.graph, pred.plan, self.cm, pred.iteration_s, self.cap)
            pred.details["at_scale_range"] = (lo, hi)
            low, high = min(low, pred.iteration_s * bounds[0] * lo), max(high, pred.iteration_s * bounds[1] * hi)
        pred.interval_s = (low, high)
        return pred


def sweep(graph: ModelGraph, cost_model: CostModel, devices: Sequence[int], *, strategies: Sequence[str] = (BEST,),
          batch_per_device: Optional[int] = None, batch: Optional[int] = None, devices_per_node: Optional[int] = None,
          dtype: str = "fp32", optimizer: str = "sgd", memory_cap_bytes: Optional[float] = None,
          framework: str = "ddp", synthetic_data: bool = False, stack: str = "pytorch",
          threshold: float = DEFAULT_EFFICIENCY_THRESHOLD, memory_format: str = "nhwc",
          cross_entropy: str = "float32", bn_group: int = 1, cuda_graphs: bool = False) -> Sweep:
    """Predict every line at every device count (module docstring). Exactly one of batch_per_device (weak
    scaling) and batch (strong scaling) is given; framework, synthetic_data, stack, memory_format, cross_entropy,
    bn_group and cuda_graphs are the run's settings, on every plan."""
    if (batch_per_device is None) == (batch is None):
        raise UserError("give either a batch per device (weak scaling) or a global batch (strong scaling)")
    if not devices or any(d < 1 for d in devices):
        raise UserError(f"device counts must be >= 1, got {list(devices)[:8]}")
    if not 0 < threshold <= 1:
        raise UserError(f"efficiency threshold must be in (0, 1], got {threshold}")
    dpn = devices_per_node or cost_model.devices_per_node
    cap = memory_cap_bytes if memory_cap_bytes is not None else cost_model.device_memory_bytes
    ev = _Evaluator(graph, cost_model, stack, cap)
    lines: dict[str, list[Point]] = {name: [] for name in dict.fromkeys(strategies)}
    settings = dict(framework=framework, synthetic_data=synthetic_data, stack=stack, memory_format=memory_format,
                    cross_entropy=cross_entropy, bn_group=bn_group, cuda_graphs=cuda_graphs)
    for p in devices:
        global_batch = batch_per_device * p if batch_per_device is not None else batch
        for name in lines:
            if name == BEST:
                point = _best_point(ev, p, global_batch, dpn, dtype, optimizer, settings)
            else:
                point = _named_point(ev, name, p, global_batch, dpn, dtype, optimizer, settings)
            lines[name].append(point)
    result = Sweep(model=graph.name, devices=tuple(devices), lines=lines, weak=batch_per_device is not None,
                   batch_per_device=batch_per_device, global_batch=batch, threshold=threshold)
    _efficiency(result)
    _crossovers(result)
    return result


def _named_point(ev: _Evaluator, name: str, p: int, batch: int, dpn: int, dtype: str, optimizer: str,
                 settings: dict) -> Point:
    """What `predictor run --strategy name` predicts on p devices (infeasible with its reason)."""
    try:
        plans = default_plans(ev.graph, name, batch, p, dpn, dtype, optimizer,
                              **{k: v for k, v in settings.items() if k not in RUN_SETTINGS})
        pred = rank([evaluate(ev.ctx, replace(plan, **{k: settings[k] for k in RUN_SETTINGS}), ev.cap)
                     for plan in plans])[0]
    except UserError as err:  # a layout that does not divide, or a coefficient the profile lacks
        return Point(p, batch, None, reason=str(err))
    return Point(p, batch, ev.with_interval(pred), reason="" if pred.feasible else pred.reason)


def _best_point(ev: _Evaluator, p: int, batch: int, dpn: int, dtype: str, optimizer: str, settings: dict) -> Point:
    """The search's fastest fitting plan on exactly p devices under the sweep's settings."""
    ranking, counts = Ranking("time", batch, 1), Counts()
    try:
        fast_search(ev.search_ctx, ranking, counts, batch=batch, devices=range(p, p + 1), devices_per_node=dpn,
                    dtype=dtype, optimizer=optimizer, cap=ev.cap, strategies=SEARCH_STRATEGIES,
                    plan_options={k: settings[k] for k in ("framework", "synthetic_data") + RUN_SETTINGS})
    except UserError as err:
        return Point(p, batch, None, reason=str(err))
    found = ranking.best()
    if not found:
        return Point(p, batch, None, reason=f"no plan on {p} device{'s' if p > 1 else ''} fits in memory ({counts.feasible} of "
                                            f"{counts.evaluated} evaluated plans runnable)")
    plan = replace(found[0].plan, **settings)
    pred = evaluate(ev.ctx, plan, ev.cap)
    return Point(p, batch, ev.with_interval(pred), reason="" if pred.feasible else pred.reason)


def _efficiency(result: Sweep) -> None:
    """Set the baseline, every usable point's efficiency and each line's first count below the threshold."""
    for p in result.devices:
        usable = [pt for points in result.lines.values() for pt in points if pt.devices == p and pt.usable]
        if usable:
            top = max(usable, key=lambda pt: pt.samples_per_s)
            result.baseline_devices, result.baseline_samples_per_device_s = p, top.samples_per_s / p
            band = top.samples_per_s_interval()
            result.baseline_interval = (band[0] / p, band[1] / p) if band else None
            break
    base, base_band = result.baseline_samples_per_device_s, result.baseline_interval
    for name, points in result.lines.items():
        result.below_threshold[name] = result.step_below_threshold[name] = None
        previous = None
        for pt in points:
            if pt.usable and previous is not None and pt.devices >= (result.baseline_devices or 0):
                pt.step_efficiency = (pt.samples_per_s / previous.samples_per_s) / (pt.devices / previous.devices)
                if result.step_below_threshold[name] is None and pt.step_efficiency < result.threshold:
                    result.step_below_threshold[name] = pt.devices
            if pt.usable:
                previous = pt
            if base and pt.usable:
                pt.efficiency = pt.samples_per_s / pt.devices / base
                band = pt.samples_per_s_interval()
                if band and base_band:
                    ends = (band[0] / pt.devices / base_band[0], band[1] / pt.devices / base_band[1])
                    pt.efficiency_interval = (min(ends + (pt.efficiency,)), max(ends + (pt.efficiency,)))
                if (result.below_threshold[name] is None and pt.devices > result.baseline_devices
                        and pt.efficiency < result.threshold):
                    result.below_threshold[name] = pt.devices


def _crossovers(result: Sweep) -> None:
    """Where the best line's strategy changes, and where the fastest usable named strategy changes."""
    def changes(winners: list[tuple[int, str, str]], kind: str) -> None:
        for (d0, s0, l0), (d1, s1, l1) in zip(winners, winners[1:]):
            if family(s0) != family(s1):
                result.crossovers.append(Crossover(d0, d1, l0, l1, kind))

    if BEST in result.lines:
        changes([(pt.devices, pt.prediction.plan.strategy, label(pt.prediction))
                 for pt in result.lines[BEST] if pt.usable], BEST)
    named = [name for name in result.lines if name != BEST]
    if len(named) > 1:
        winners = []
        for k, p in enumerate(result.devices):
            usable = [result.lines[name][k] for name in named if result.lines[name][k].usable]
            if usable:
                fastest = min(usable, key=lambda pt: pt.prediction.iteration_s)
                winners.append((p, fastest.prediction.plan.strategy, label(fastest.prediction)))
        changes(winners, "named")
