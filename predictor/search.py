"""Search over strategies, hybrid splits, device counts (any integer) and micro-batch counts.

For every device count P and every divisor `inner` of P (the model-parallel group, the rest data parallel), every
strategy's candidates (predictor.search_space), each a Plan evaluated by the same strategy models as `predictor
run`, sharing one Context. Objectives: `time` (iteration seconds) or `cost` (device-seconds per sample); plans over
the memory cap are dropped. Two walks with the same answer (tests/predictor/test_search_fast.py):
`exhaustive=True` evaluates every plan in order (the reference); the default (predictor.search_fast) settles
infeasible plans by the strategies' own checks, prunes plans a lower bound proves can neither fit nor rank, and
evaluates the rest best bound first. Ties go to the plan enumerated first. docs/method.md §22.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from calibrate.cost_api import CostModel
from predictor.graph import ModelGraph
from predictor.plan import MEMORY_FORMATS, Prediction
from predictor.search_fast import fast_search
from predictor.search_space import SEARCH_STRATEGIES, Counts, Ranking, candidates
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from profiler.errors import UserError

@dataclass
class SearchResult:
    best: list[Prediction]
    evaluated: int  # plans costed
    feasible: int  # of which runnable (limits, divisibility)
    fitting: int  # of which within the memory cap
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time (what "on one core" means on a shared machine)
    best_by_strategy: dict = None  # strategy name -> fastest fitting Prediction (for swap vs model parallel)
    pruned: int = 0  # plans not evaluated: a bound proved they can neither fit nor rank (not in `evaluated`)

    @property
    def plans_per_s(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else math.inf

    @property
    def plans_per_cpu_s(self) -> float:
        return self.evaluated / self.cpu_seconds if self.cpu_seconds > 0 else math.inf


def search(graph: ModelGraph, cost_model: CostModel, *, batch: int, max_devices: int, min_devices: int = 1,
           devices_per_node: int | None = None, dtype: str = "fp32", optimizer: str = "sgd",
           memory_cap_bytes: float | None = None, objective: str = "time", top: int = 10,
           strategies=SEARCH_STRATEGIES, interval: bool = True, exhaustive: bool = False, framework: str = "ddp",
           synthetic_data: bool = False, context_parallel: int | None = None,
           expert_parallel: int | None = None, tp_comm_overlap: bool = False,
           overlap_param_gather: bool = False, moe_a2a_overlap: bool = False, memory_format: str = "nhwc",
           cross_entropy: str = "float32",
           bn_group: int = 1, cuda_graphs: bool = False, expert_tensor_parallel: int | None = None) -> SearchResult:
    """The `top` best plans and the fastest per strategy. exhaustive=True evaluates every candidate in order
    (the reference); the default prunes with bounds (predictor.search_fast) and returns the same plans.
    framework, synthetic_data, the run's settings (memory_format, cross_entropy, bn_group, cuda_graphs: a plan it cannot take is
    infeasible) and the overlaps the stack runs (Plan.tp_comm_overlap, Plan.overlap_param_gather, Plan.moe_a2a_overlap:
    applied where a
    layout allows them) are set on every candidate. A mixture of
    experts, or context_parallel > 1, adds Megatron-Core's expert/context layouts (predictor.search_moe_cp); a
    context or expert degree given keeps the search to those layouts at that degree, an expert tensor degree given
    (expert_tensor_parallel) the expert layouts to it (None: the tensor degree and, with one above 1, degree 1)."""
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
    if memory_format not in MEMORY_FORMATS:
        raise UserError(f"unknown memory format {memory_format!r}; known: {', '.join(MEMORY_FORMATS)}")
    options = {"framework": framework, "synthetic_data": synthetic_data, "tp_comm_overlap": tp_comm_overlap,
               "overlap_param_gather": overlap_param_gather, "moe_a2a_overlap": moe_a2a_overlap,
               "memory_format": memory_format,
               "cross_entropy": cross_entropy, "bn_group": bn_group, "cuda_graphs": cuda_graphs}
    ranking = Ranking(objective, batch, top)
    devices = range(min_devices, max_devices + 1)
    counts = Counts()
    start, cpu_start = time.perf_counter(), time.process_time()
    from predictor.search_moe_cp import expert_count, walk
    fixed = (context_parallel or 1) > 1 or (expert_parallel or 1) > 1
    index = 0  # with a context or expert degree given, only the expert/context layouts (below) take it
    if not fixed and exhaustive:
        for index, plan in enumerate(candidates(graph, batch, devices, dpn, dtype, optimizer, strategies, options)):
            pred = evaluate(ctx, plan, cap)
            if counts.tally(pred):
                ranking.add(index, pred)
        index += 1
    elif not fixed:
        fast_search(ctx, ranking, counts, batch=batch, devices=devices, devices_per_node=dpn, dtype=dtype,
                    optimizer=optimizer, cap=cap, strategies=strategies, plan_options=options)
        index = 1 << 40  # past every candidate index the fast walk can have ranked
    if (fixed or expert_count(ctx)) and "data+tensor+pipeline" in strategies:
        walk(ctx, ranking, counts, batch=batch, devices=devices, devices_per_node=dpn, dtype=dtype, optimizer=optimizer,
             cap=cap, plan_options=options, context=(context_parallel or 1,),
             experts=(expert_parallel,) if expert_parallel else None, first_index=index,
             expert_tensor=expert_tensor_parallel)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    best = ranking.best()
    if interval:  # as `predictor run` gives each plan's: coefficient bounds, the model's error, the at-scale range
        from predictor.api import predict
        for pred in best:
            full = predict(graph, pred.plan, cost_model, device_memory_bytes=cap, context=ctx)
            pred.interval_s = full.interval_s
            if "at_scale_range" in full.details:
                pred.details["at_scale_range"] = full.details["at_scale_range"]
    return SearchResult(best, counts.evaluated, counts.feasible, counts.fitting, seconds, cpu_seconds,
                        ranking.best_by_strategy, counts.pruned)
