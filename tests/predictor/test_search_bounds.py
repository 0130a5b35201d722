"""The search's lower bounds beside the costs (each strategy's `lower_bound` in the registry, predictor.strategies
.bounds): on random small nets (the generator of `predictor validate --suite random:N`) and small zoo models, with
random dtypes, optimizers, plan options (framework, synthetic data, mixed precision, DDP bucket size, the
Megatron-Core overlaps), device
counts, devices per node, memory caps and profiles, every candidate's bound with every refinement the search applies
is below its evaluation, a candidate its bound refuses is infeasible, a group's bound is below each member's, and the
bounded search returns what evaluating every candidate returns. A few seconds (fast tier)."""
from __future__ import annotations

import random
from functools import lru_cache

import pytest

from predictor.api import load_cost_model, load_model
from predictor.layercost import check_dtype
from predictor.overlap import FRAMEWORKS
from predictor.memory import MIXED_DTYPES
from predictor.plan import DTYPES, OPTIMIZERS, Plan
from predictor.search_fast import LOW, costs_nonnegative, refined, spec_bound
from predictor.search_space import (SEARCH_STRATEGIES, candidate_specs, hybrid3d_schedules, hybrid3d_variants,
                                    megatron_layers, spec_plan)
from predictor.strategies import evaluate
from predictor.strategies.bounds import Bounds
from predictor.strategies.context import Context
from predictor.strategies.registry import BOUNDS, GROUP_BOUNDS, EVALUATORS
from predictor.strategies.spatial import region_end, splittable
from profiler.errors import UserError
from tests.predictor.test_search_fast import _hybrid_cpu_model, _same

#: a GPT small enough for a plan-by-plan search, with every data+tensor+pipeline dimension (4 layers: interleaving);
#: also as a mixture of experts (the fast walk's candidates have no expert or context parallelism)
TINY_GPT = dict(layers=4, hidden=64, heads=4, seq=32, vocab=128)


def check_bounds(graph, cm, *, batch: int, devices: range, devices_per_node: int, dtype: str = "fp32",
                 optimizer: str = "sgd", cap: float | None = None, options: dict | None = None) -> int:
    """Assert, on every candidate of the search, what the module docstring says; the feasible plans checked."""
    ctx = Context(graph, cm)
    cap = cm.device_memory_bytes if cap is None else cap
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer, **(options or {}))
    timed = costs_nonnegative(cm)
    bounders: dict[int, Bounds] = {}
    layers = megatron_layers(graph)

    def bounds_for(p: int) -> Bounds:
        pctx = ctx.for_plan(Plan("data", devices=p, p_data=p, **base))
        if id(pctx) not in bounders:
            bounders[id(pctx)] = Bounds(pctx, Plan("data", devices=1, **base), cap, timed)
        return bounders[id(pctx)]

    checked = 0

    def against(spec, found) -> None:
        nonlocal checked
        plan = spec_plan(spec, base)
        pred = evaluate(ctx, plan, cap)
        if found is None:
            assert not pred.feasible, f"settled as infeasible: {plan}"
            return
        time_s, memory = refined(bounds_for(plan.devices), found)
        if pred.feasible:
            if memory * LOW > cap:  # proved over the cap (a pipeline may say so with an infinite bound)
                assert not pred.fits, (plan, memory, pred.memory_bytes)
            else:
                assert memory * LOW <= pred.memory_bytes, (plan, memory, pred.memory_bytes)
            assert time_s * LOW <= pred.iteration_s, (plan, time_s, pred.iteration_s)
            checked += 1

    for spec in candidate_specs(graph, batch, devices, devices_per_node, dtype, optimizer, grouped=True,
                                plan_options=options):
        kind = spec[0]
        if kind == "spatial-group":
            _, strategy, p, p_data, inner, splits, with_spatial, with_mix = spec
            b = bounds_for(p)
            grouped = []
            settled = GROUP_BOUNDS[strategy](b, strategy, p, p_data, inner, splits, with_spatial, with_mix,
                                             lambda *bound: grouped.append(bound))
            members = [("spatial", name, p, p_data, inner, split) for split in splits
                       for name, wanted in ((strategy, with_spatial), ("spatial-then-data", with_mix)) if wanted]
            singles = [spec_bound(b, member) for member in members]
            assert settled == sum(found is None for found in singles)
            assert [(offset, name, split) for offset, name, split, *_ in grouped] == [
                (j, m[1], m[5]) for j, (m, found) in enumerate(zip(members, singles)) if found is not None]
            for offset, _, _, time_s, memory, _ in grouped:
                assert (time_s, memory) == singles[offset][:2]
            for member, found in zip(members, singles):
                assert region_end(ctx, member[5], None) == _walked_region_end(ctx, member[5])
                against(member, found)
        elif kind == "3d-group":
            _, strategy, p, p_data, inner, layout = spec
            b = bounds_for(p)
            group = GROUP_BOUNDS[strategy](b, strategy, p, p_data, inner, layout,
                                           hybrid3d_schedules(layout[1], batch // p_data, layers))
            for variant in hybrid3d_variants(*layout, p_data, batch // p_data, layers):
                member = ("3d", strategy, p, p_data, inner, layout + variant)
                found = spec_bound(b, member)
                assert (group is None) == (found is None)
                if found is not None:  # (a bound over the cap has no time: it is pruned on memory)
                    assert group[1] <= found[1] * (1 + 1e-12), member
                    assert group[0] <= found[0] * (1 + 1e-12) or found[1] * LOW > cap, member
                against(member, found)
        else:
            assert (spec[1].strategy if kind == "addon" else spec[1]) in BOUNDS, spec
            against(spec, spec_bound(bounds_for(spec[1].devices if kind == "addon" else spec[2]), spec))
    return checked


def _walked_region_end(ctx, split) -> int:
    """strategies.spatial's region: the leading layers `splittable` by the split, walked one by one."""
    end = 0
    while end < ctx.n_layers and splittable(ctx, end, split):
        end += 1
    return end


@lru_cache(maxsize=None)
def _random_graphs(seed: int, n: int) -> tuple:
    from predictor.suites.random_nets import random_nets, spec_graph
    return tuple((spec_graph(net.spec), net.batch) for net in random_nets(n, seed))


@lru_cache(maxsize=None)
def _profile(name: str):
    return _hybrid_cpu_model() if name == "cpu" else load_cost_model(None if name == "reference" else name)[0]


PROFILES = ("reference", "a100-80gb-dgx-8gpu.published", "cpu")


def _case(rng: random.Random, graph, batch: int) -> dict:
    """A random search over `graph`: profile, dtype, optimizer, plan options, devices, memory cap."""
    profile = rng.choice(PROFILES)
    cm = _profile(profile)
    dtypes = ["fp32"]  # the CPU profile's only one
    for dtype in DTYPES[1:] if profile != "cpu" else ():
        try:
            check_dtype(cm, dtype, profile)
            dtypes.append(dtype)
        except UserError:  # a dtype the profile has no coefficients for
            continue
    dtype = rng.choice(dtypes)
    options = dict(framework=rng.choice(FRAMEWORKS), synthetic_data=rng.random() < 0.5,
                   bucket_bytes=rng.choice([25e6, 1e6, 1e4]), tp_comm_overlap=rng.random() < 0.5,
                   overlap_param_gather=rng.random() < 0.5)
    if dtype in MIXED_DTYPES and rng.random() < 0.5:
        options["mixed_precision"] = "half"
    batch = rng.choice([b for b in (batch, 2 * batch, 8, 12, 16, 24, 48) if b >= 2])
    low = rng.randint(1, 4)
    dpn = rng.choice([1, 2, 4, 8])
    # a cap that the whole model's data-parallel state exceeds sometimes: memory pruning and infeasible plans
    serial = evaluate(Context(graph, cm), Plan("serial", batch=batch, devices=1, devices_per_node=dpn, dtype=dtype,
                                               **options))
    cap = rng.choice([cm.device_memory_bytes, serial.memory_bytes * rng.uniform(0.2, 1.5)])
    return dict(cm=cm, batch=batch, devices=range(low, low + rng.randint(2, 12)), devices_per_node=dpn,
                dtype=dtype, optimizer=rng.choice(OPTIMIZERS), cap=cap, options=options)


def _graphs():
    graphs = [(g, b) for g, b in _random_graphs(11, 4)]
    return graphs + [(load_model("small_cnn2d"), 16), (load_model("small_cnn3d"), 8),
                     (load_model("gpt", **TINY_GPT), 16), (load_model("gpt", **TINY_GPT, experts=4, top_k=2), 8)]


def _walks(graph, cm, *, batch, devices, devices_per_node, dtype, optimizer, cap, options, objective, top):
    """(every candidate evaluated in order, the bounded walk) as predictor.search runs them, with any plan options."""
    from predictor.search import SearchResult
    from predictor.search_fast import fast_search
    from predictor.search_space import Counts, Ranking, candidates
    ctx, results = Context(graph, cm), []
    for bounded in (False, True):
        ranking, counts = Ranking(objective, batch, top), Counts()
        if bounded:
            fast_search(ctx, ranking, counts, batch=batch, devices=devices, devices_per_node=devices_per_node,
                        dtype=dtype, optimizer=optimizer, cap=cap, strategies=SEARCH_STRATEGIES, plan_options=options)
        else:
            for index, plan in enumerate(candidates(graph, batch, devices, devices_per_node, dtype, optimizer,
                                                    plan_options=options)):
                pred = evaluate(ctx, plan, cap)
                if counts.tally(pred):
                    ranking.add(index, pred)
        results.append(SearchResult(ranking.best(), counts.evaluated, counts.feasible, counts.fitting, 0.0, 0.0,
                                    ranking.best_by_strategy, counts.pruned))
    return results


def test_every_searched_strategy_has_a_bound_beside_its_evaluator():
    searched = {"serial", "data", "filter", "data+filter", "channel", "data+channel", "spatial", "data+spatial",
                "spatial-then-data", "pipeline", "data+pipeline", "tensor", "data+tensor", "data+tensor+pipeline",
                "serial+recompute", "data+recompute", "outofcore", "cooperative"}
    assert searched <= set(BOUNDS) <= set(EVALUATORS)


@pytest.mark.parametrize("seed", range(30))
def test_bounds_are_below_the_evaluation_and_the_search_is_exhaustive(seed):
    rng = random.Random(seed)
    graphs = _graphs()
    graph, batch = graphs[seed] if seed < len(graphs) else rng.choice(graphs)
    case = _case(rng, graph, batch)
    checked = check_bounds(graph, **case)
    exhaustive, fast = _walks(graph, **case, objective=rng.choice(["time", "cost"]), top=rng.choice([1, 5, 20]))
    _same(exhaustive, fast)
    assert checked or not exhaustive.feasible
