"""The default walk of `predictor search` (predictor.search, over predictor.search_space): the same ranking as
evaluating every candidate, from far fewer evaluations (issue 21; docs/method.md §22).

Each candidate's lower bounds on time and memory come from the registry (strategies.registry BOUNDS: each strategy
module's `lower_bound` beside its `evaluate`, from the same helpers; GROUP_BOUNDS: a group's spatial splits, a
layout's data+tensor+pipeline variants). A plan the strategy's checks refuse is settled unbuilt, a memory bound over
the cap prunes; the rest wait in a heap, best bound first, refined before evaluation, and a plan whose bound exceeds
both the top-k cut and its strategy's best is pruned. Ranking the evaluated plans in candidate order gives the
exhaustive walk's result (tests/predictor/test_search_fast.py, test_search_bounds.py). Bounds are relaxed by
bounds.MARGIN; time bounds need costs >= 0 (calibrate validates it), else only memory bounds prune.
"""
from __future__ import annotations

import heapq
import math

from predictor.plan import Plan
from predictor.search_space import (Counts, Ranking, candidate_specs, hybrid3d_schedules, hybrid3d_variant_count,
                                    hybrid3d_variants, megatron_layers, spec_plan)
from predictor.strategies import evaluate
from predictor.strategies.bounds import LOW, Bounds
from predictor.strategies.bounds import refine as refine_bound
from predictor.strategies.context import Context
from predictor.strategies.registry import BOUNDS, GROUP_BOUNDS

_INF = math.inf
#: cost-model wrappers that multiply the wrapped model's times by positive factors (predictor.shared_cores,
#: predictor.stacks), by class name so this module imports neither
_POSITIVE_WRAPPERS = ("SharedCores", "StackScaled")


def costs_nonnegative(cost_model) -> bool:
    """Whether every time `cost_model` returns is known to be >= 0 (module docstring)."""
    from calibrate.cost_model import ProfileCostModel
    cm = cost_model
    for _ in range(8):
        if isinstance(cm, ProfileCostModel):
            return True
        if type(cm).__name__ not in _POSITIVE_WRAPPERS or getattr(cm, "factor", 1.0) <= 0:
            return False
        cm = getattr(cm, "_cm", None)
    return False


def spec_bound(bounds: Bounds, spec: tuple) -> tuple | None:
    """The registry's lower bound of one candidate_specs tuple (not a group): None (refused by the strategy's own
    checks) or (time_s, memory_bytes, refinement)."""
    kind = spec[0]
    if kind == "addon":
        plan = spec[1]
        bound = BOUNDS.get(plan.strategy)
        return bound(bounds, plan.strategy, plan.devices, plan.p_data, plan.inner, plan) if bound else (0.0, 0.0, None)
    _, strategy, p, p_data, inner, knob = spec
    bound = BOUNDS.get(strategy)
    return bound(bounds, strategy, p, p_data, inner, knob) if bound else (0.0, 0.0, None)


def refined(bounds: Bounds, found: tuple) -> tuple[float, float]:
    """(time_s, memory_bytes) of a bound with every refinement applied (what the search reaches before evaluating)."""
    time_s, memory, refinement = found
    while refinement is not None:
        extra_s, extra_bytes, refinement = refine_bound(bounds, refinement)
        time_s, memory = time_s + extra_s, memory + extra_bytes
    return time_s, memory


def fast_search(ctx: Context, ranking: Ranking, counts: Counts, *, batch: int, devices: range, devices_per_node: int,
                dtype: str, optimizer: str, cap: float, strategies, plan_options: dict | None = None) -> None:
    """Feed `ranking` what evaluating every candidate would, counting into `counts`."""
    graph = ctx.graph
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer, **(plan_options or {}))
    timed = costs_nonnegative(ctx.cm)
    bounders: dict[int, Bounds] = {}
    objective_cost = ranking.objective == "cost"
    records = []  # (score bound, index, time bound, memory bound, spec, bounds, refinement)
    current_p, bounds = None, None
    index = 0
    layers_3d = megatron_layers(graph) if "data+tensor+pipeline" in strategies else 0
    for spec in candidate_specs(graph, batch, devices, devices_per_node, dtype, optimizer, strategies, grouped=True,
                                plan_options=plan_options):
        kind = spec[0]
        p = spec[1].devices if kind == "addon" else spec[2]
        if p != current_p:  # the context evaluate() uses for plans on p devices (shared cores, stacks)
            current_p = p
            template = Plan("data", devices=p, p_data=p, **base)
            pctx = ctx.for_plan(template)
            bounds = bounders.get(id(pctx))
            if bounds is None:
                bounds = bounders[id(pctx)] = Bounds(pctx, Plan("data", devices=1, **base), cap, timed)
        if kind == "spatial-group":
            _, strategy, p, p_data, inner, splits, with_spatial, with_mix = spec

            def emit(offset, name, split, time_s, memory, refine, p=p, p_data=p_data, inner=inner, index=index,
                     bounds=bounds):
                if memory * LOW > cap:
                    counts.pruned += 1
                    return
                time_s *= LOW
                records.append((p * time_s / batch if objective_cost else time_s, index + offset, time_s, memory,
                                ("spatial", name, p, p_data, inner, split), bounds, refine))

            counts.evaluated += GROUP_BOUNDS[strategy](bounds, strategy, p, p_data, inner, splits, with_spatial,
                                                       with_mix, emit)
            index += len(splits) * (with_spatial + with_mix)
            continue
        if kind == "3d-group":  # one layout's variants: bounded together, expanded when the layout's turn comes
            _, strategy, p, p_data, inner, layout = spec
            size = hybrid3d_variant_count(*layout, p_data, batch // p_data, layers_3d)
            found = GROUP_BOUNDS[strategy](bounds, strategy, p, p_data, inner, layout,
                                           hybrid3d_schedules(layout[1], batch // p_data, layers_3d))
            if found is None:  # every variant refused by evaluate's own checks
                counts.evaluated += size
            elif found[1] * LOW > cap:
                counts.pruned += size
            else:
                time_s = found[0] * LOW
                records.append((p * time_s / batch if objective_cost else time_s, index, time_s, found[1], spec,
                                bounds, size))
            index += size
            continue
        found = spec_bound(bounds, spec)
        index += 1
        if found is None:  # refused by the strategy's own check: that is its evaluation
            counts.evaluated += 1
            continue
        time_s, memory, refine = found
        if memory * LOW > cap:
            counts.pruned += 1
            continue
        time_s *= LOW
        records.append((p * time_s / batch if objective_cost else time_s, index - 1, time_s, memory, spec, bounds,
                        refine))
    heapq.heapify(records)  # smallest bound first (ties: candidate order); index makes every key unique

    top = ranking.top
    worst: list[float] = []  # max-heap (negated) of the `top` best scores evaluated so far
    best: dict[str, float] = {}
    kept = []  # (candidate index, prediction) of the evaluated plans that fit
    while records:
        score, index, time_s, memory, spec, bounds, refine = heapq.heappop(records)
        kind = spec[0]
        plan_strategy = spec[1].strategy if kind == "addon" else spec[1]
        threshold = -worst[0] if len(worst) >= top else _INF
        if score > threshold and time_s > best.get(plan_strategy, _INF):
            counts.pruned += refine if kind == "3d-group" else 1
            continue
        if kind == "3d-group":  # expand the layout into its variants, each with its own bounds
            _, strategy, p, p_data, inner, layout = spec
            lower_bound = BOUNDS[strategy]
            for j, variant in enumerate(hybrid3d_variants(*layout, p_data, batch // p_data, layers_3d)):
                knob = layout + variant
                time_v, memory_v, _ = lower_bound(bounds, strategy, p, p_data, inner, knob)
                if memory_v * LOW > cap:
                    counts.pruned += 1
                    continue
                time_v *= LOW
                heapq.heappush(records, (p * time_v / batch if objective_cost else time_v, index + j, time_v,
                                         memory_v, ("3d", strategy, p, p_data, inner, knob), bounds, None))
            continue
        if refine is not None:  # tighten the bound, and wait for the turn of the tighter one
            extra_s, extra_bytes, refine = refine_bound(bounds, refine)
            memory += extra_bytes
            if memory * LOW > cap:
                counts.pruned += 1
                continue
            if extra_s > 0 or refine is not None:
                time_s += extra_s * LOW
                score = (spec[1].devices if kind == "addon" else spec[2]) * time_s / batch if objective_cost else time_s
                heapq.heappush(records, (score, index, time_s, memory, spec, bounds, refine))
                continue
        pred = evaluate(ctx, spec_plan(spec, base), cap)
        if not counts.tally(pred):
            continue
        kept.append((index, pred))
        exact = ranking.score(pred)
        if len(worst) < top:
            heapq.heappush(worst, -exact)
        elif exact < -worst[0]:
            heapq.heapreplace(worst, -exact)
        if pred.iteration_s < best.get(plan_strategy, _INF):
            best[plan_strategy] = pred.iteration_s
    kept.sort(key=lambda item: item[0])
    for index, pred in kept:
        ranking.add(index, pred)
