"""Search over strategies, hybrid splits, device counts (any integer) and micro-batch counts.

For every device count P in the range and every divisor `inner` of P (the model-parallel group, the
rest data parallel): data; data+filter / data+channel (filter / channel when inner = P); data+spatial
and spatial-then-data for every factorisation of inner over the spatial dims; data+pipeline with every
micro-batch count that divides the per-pipeline batch. Each candidate is a Plan evaluated by the same
strategy models as `predictor run`, sharing one Context so per-layer costs, layer-range sums, collective
times and bucket layouts are computed once and reused (that is what makes ~10^4 plans/s possible).

Objectives: `time` = iteration seconds; `cost` = device-seconds per sample (P · iteration_s / B), i.e.
GPU-hours per epoch up to a constant. Plans that do not fit the memory cap are dropped.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Iterator

from calibrate.cost_api import CostModel
from predictor.graph import ModelGraph
from predictor.outofcore_strategies import SEARCH_FAMILIES, search_candidates
from predictor.plan import Plan, Prediction
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from profiler.errors import UserError

SEARCH_STRATEGIES = ("data", "filter", "channel", "spatial", "pipeline", "spatial-then-data")
# add-on families (predictor/outofcore_strategies.py): recompute, outofcore, cooperative
SEARCH_STRATEGIES += tuple(SEARCH_FAMILIES)


@dataclass
class SearchResult:
    best: list[Prediction]
    evaluated: int  # plans costed
    feasible: int  # of which runnable (limits, divisibility)
    fitting: int  # of which within the memory cap
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time (what "on one core" means on a shared machine)
    best_by_strategy: dict = None  # strategy name -> fastest fitting Prediction (for swap vs model parallel)

    @property
    def plans_per_s(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else math.inf

    @property
    def plans_per_cpu_s(self) -> float:
        return self.evaluated / self.cpu_seconds if self.cpu_seconds > 0 else math.inf


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factorizations(p: int, ndim: int) -> list[tuple[int, ...]]:
    """Every ordered way to write p as a product of ndim positive factors."""
    if ndim == 1:
        return [(p,)]
    return [(d, *rest) for d in divisors(p) for rest in factorizations(p // d, ndim - 1)]


def candidates(graph: ModelGraph, batch: int, devices: range, devices_per_node: int, dtype: str,
               optimizer: str, strategies=SEARCH_STRATEGIES) -> Iterator[Plan]:
    nd = len(graph.input_shape) - 1
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer)
    for p in devices:
        for inner in divisors(p):
            p_data = p // inner
            if batch % p_data:
                continue  # every strategy here needs whole samples per data-parallel replica
            if inner == 1:
                if "data" in strategies:
                    yield Plan("data" if p > 1 else "serial", devices=p, p_data=p, **base)
                continue
            prefix = "data+" if p_data > 1 else ""
            if "filter" in strategies:
                yield Plan(prefix + "filter", devices=p, p_data=p_data, p_filter=inner, **base)
            if "channel" in strategies:
                yield Plan(prefix + "channel", devices=p, p_data=p_data, p_channel=inner, **base)
            for split in factorizations(inner, nd):
                if "spatial" in strategies:
                    yield Plan(prefix + "spatial", devices=p, p_data=p_data, p_spatial=inner, spatial_split=split, **base)
                if "spatial-then-data" in strategies:
                    yield Plan("spatial-then-data", devices=p, p_data=p_data, p_spatial=inner, spatial_split=split, **base)
            if "pipeline" in strategies and inner <= len(graph.layers):
                for s in divisors(batch // p_data):
                    yield Plan(prefix + "pipeline", devices=p, p_data=p_data, stages=inner, micro_batches=s, **base)
        yield from search_candidates(batch, p, devices_per_node, dtype, optimizer, strategies)


def search(graph: ModelGraph, cost_model: CostModel, *, batch: int, max_devices: int, min_devices: int = 1,
           devices_per_node: int | None = None, dtype: str = "fp32", optimizer: str = "sgd",
           memory_cap_bytes: float | None = None, objective: str = "time", top: int = 10,
           strategies=SEARCH_STRATEGIES, interval: bool = True) -> SearchResult:
    if batch <= 0 or max_devices <= 0 or min_devices <= 0 or min_devices > max_devices:
        raise UserError(f"search needs 0 < min devices ({min_devices}) <= max devices ({max_devices}) and batch > 0 ({batch})")
    if objective not in ("time", "cost"):
        raise UserError(f"unknown objective {objective!r}; known: time, cost")
    unknown = set(strategies) - set(SEARCH_STRATEGIES)
    if unknown:
        raise UserError(f"unknown search strategies {sorted(unknown)}; known: {', '.join(SEARCH_STRATEGIES)}")
    dpn = devices_per_node or cost_model.devices_per_node
    cap = memory_cap_bytes if memory_cap_bytes is not None else cost_model.device_memory_bytes
    ctx = Context(graph, cost_model)
    heap: list[tuple[float, int, Prediction]] = []
    evaluated = feasible = fitting = 0
    best_by_strategy: dict[str, Prediction] = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    for plan in candidates(graph, batch, range(min_devices, max_devices + 1), dpn, dtype, optimizer, strategies):
        pred = evaluate(ctx, plan, cap)
        evaluated += 1
        if not pred.feasible:
            continue
        feasible += 1
        if not pred.fits:
            continue
        fitting += 1
        if plan.strategy not in best_by_strategy or pred.iteration_s < best_by_strategy[plan.strategy].iteration_s:
            best_by_strategy[plan.strategy] = pred
        score = pred.iteration_s if objective == "time" else plan.devices * pred.iteration_s / batch
        item = (-score, evaluated, pred)
        if len(heap) < top:
            heapq.heappush(heap, item)
        elif -score > heap[0][0]:
            heapq.heapreplace(heap, item)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    best = [item[2] for item in sorted(heap, key=lambda it: -it[0])]
    if interval:
        low, high = Context(graph, cost_model.at_bound("low")), Context(graph, cost_model.at_bound("high"))
        for pred in best:
            pred.interval_s = (min(evaluate(low, pred.plan, cap).iteration_s, pred.iteration_s),
                               max(evaluate(high, pred.plan, cap).iteration_s, pred.iteration_s))
    return SearchResult(best, evaluated, feasible, fitting, seconds, cpu_seconds, best_by_strategy)

