"""The default search (predictor.search_fast: bounds, pruning, best bound first) returns what evaluating every
candidate returns: the same top 20 and the same fastest plan per strategy, to 1e-9 in time, on several models,
batches, device ranges, objectives and cost models; every bound it prunes with is below the exact evaluation.
No timing is asserted here (python -m bench search measures the speed)."""
from __future__ import annotations

import heapq
import random

import pytest

from predictor.api import load_cost_model, load_model
from predictor.search import search
from predictor.search_space import Ranking, candidate_specs, spec_plan
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

CASES = [  # model, batch, max devices, objective, profile (None: the default reference profile), options
    ("resnet50", 256, 64, "time", None, {}),
    ("resnet50", 4096, 256, "time", None, {}),
    ("resnet50", 256, 32, "cost", None, {"memory_cap_bytes": 3e9}),
    ("vgg16", 512, 128, "time", "a100-dgx-8gpu.published", {}),
    ("small_cnn2d", 48, 96, "cost", "p100-dgx1-8gpu.published", {}),
    ("small_cnn2d", 64, 64, "time", None, {"strategies": ("spatial-then-data", "filter", "pipeline", "outofcore")}),
    ("small_cnn3d", 128, 256, "time", None, {}),
    ("cosmoflow", 64, 64, "time", "a100-dgx-8gpu.published", {}),
    ("efficientnet_b0", 128, 32, "time", "h100-dgx-8gpu.published", {"min_devices": 4}),
    ("resnet50", 512, 48, "time", "a100-dgx-8gpu.published", {"dtype": "bf16", "optimizer": "adam"}),
    # tensor plans (VGG's classifier pairs): tensor / data+tensor against the other model-parallel families
    ("vgg16", 256, 64, "time", None, {"strategies": ("tensor", "data", "filter", "channel", "pipeline")}),
]


def _same(exhaustive, fast):
    assert [p.plan for p in fast.best] == [p.plan for p in exhaustive.best]
    for mine, ref in zip(fast.best, exhaustive.best):
        assert mine.iteration_s == pytest.approx(ref.iteration_s, rel=1e-9)
    assert fast.best_by_strategy.keys() == exhaustive.best_by_strategy.keys()
    for name, ref in exhaustive.best_by_strategy.items():
        assert fast.best_by_strategy[name].plan == ref.plan
        assert fast.best_by_strategy[name].iteration_s == pytest.approx(ref.iteration_s, rel=1e-9)
    # every candidate is evaluated or pruned; pruned plans are never counted as evaluated
    assert fast.evaluated + fast.pruned == exhaustive.evaluated
    assert fast.feasible <= exhaustive.feasible and fast.fitting <= exhaustive.fitting


def _hybrid_cpu_model():
    """A CPU profile with fitted trees (ranks share the cores: per-device-count contexts), with the reference
    profile's collectives so that plans on several devices can be costed."""
    from calibrate.cost_model import ProfileCostModel
    cpu, _ = load_cost_model("tests/data/drift_quick_cpu_profile.yaml")
    ref, _ = load_cost_model(None)
    coefficients = cpu.coefficients.model_copy(update={"links": ref.coefficients.links,
                                                       "collectives": ref.coefficients.collectives,
                                                       "fabric": ref.coefficients.fabric})
    return ProfileCostModel(coefficients, name="cpu+collectives", device_memory_bytes=8e9, devices_per_node=4,
                            provenance="calibrated", cpu_cores=2)


@pytest.mark.parametrize("model, batch, max_devices, objective, profile, options", CASES,
                         ids=[f"{c[0]}-b{c[1]}-p{c[2]}-{c[3]}" for c in CASES])
@pytest.mark.slow  # a plan-by-plan search per case: up to 10 s on 2 cores (CI runs it)
def test_fast_search_ranks_as_evaluating_every_plan(model, batch, max_devices, objective, profile, options):
    graph = load_model(model)
    cm, _ = load_cost_model(profile)
    common = dict(batch=batch, max_devices=max_devices, objective=objective, top=20, interval=False, **options)
    exhaustive = search(graph, cm, exhaustive=True, **common)
    fast = search(graph, cm, **common)
    assert exhaustive.best and fast.pruned > 0
    _same(exhaustive, fast)


@pytest.mark.parametrize("model, batch, objective", [("small_cnn2d", 64, "time"), ("small_cnn3d", 16, "cost")])
def test_fast_search_on_a_cpu_profile_with_trees(model, batch, objective):
    graph, cm = load_model(model), _hybrid_cpu_model()
    common = dict(batch=batch, max_devices=16, objective=objective, top=20, interval=False)
    exhaustive, fast = search(graph, cm, exhaustive=True, **common), search(graph, cm, **common)
    assert len(exhaustive.best) == 20 and len(exhaustive.best_by_strategy) > 1  # rankings to compare, not empty
    _same(exhaustive, fast)


def test_tensor_candidates_are_the_degrees_dividing_the_pairs_widths():
    from predictor.strategies.tensor import tensor_split
    vgg = load_model("vgg16")  # classifier 25088 -> 4096 -> 4096 (a pair) -> 1000 (replicated)
    width = tensor_split(vgg).width_gcd
    assert width == 4096
    specs = [s for s in candidate_specs(vgg, 240, range(1, 25), 8, "fp32", "sgd") if s[0] == "tensor"]
    assert {s[4] for s in specs} == {1 << k for k in range(1, 5)}  # 2, 4, 8, 16 divide 4096; 3, 5, 6, ... do not
    assert ("tensor", "data+tensor", 24, 3, 8, None) in specs and ("tensor", "tensor", 16, 1, 16, None) in specs
    assert not [s for s in candidate_specs(load_model("resnet50"), 64, range(1, 9), 8, "fp32", "sgd")
                if s[0] == "tensor"]  # no pair to split


#: a GPT whose 16 devices must hold it 8 to 16 ways (0.3 GB per device): Megatron's layout wins
GPT_3D = dict(layers=8, hidden=1024, heads=16, seq=512, vocab=1024)
GPT_3D_SEARCH = dict(batch=64, min_devices=16, max_devices=16, dtype="fp16", optimizer="adam", memory_cap_bytes=3e8,
                     top=10, interval=False)


def test_data_tensor_pipeline_candidates_for_transformers():
    """T · K = inner with T dividing the heads' widths and 2 <= K <= the blocks between cut points, or K = 1 with
    T >= 2 (Megatron without pipelining); per layout every
    micro-batch count, 1F1B and the interleaved schedule (every v with whole layers per chunk, S a multiple of K),
    no / selective / full recomputation, sequence parallelism with T > 1, ZeRO-1 with replicas; none for a CNN (no
    attention), even with a tensor pair (VGG)."""
    from predictor.search_space import RECOMPUTE_CHOICES, megatron_3d_shape, megatron_layers
    from predictor.strategies.hybrid3d import cut_points
    gpt = load_model("gpt", **GPT_3D)
    widths, blocks = megatron_3d_shape(gpt)
    # the residual stream alone crosses between the layers and between each layer's attention and MLP halves
    assert widths == 16 and blocks == len(cut_points(Context(gpt, None))) >= 2 * GPT_3D["layers"]
    assert megatron_layers(gpt) == GPT_3D["layers"]
    specs = [s for s in candidate_specs(gpt, 64, range(16, 17), 8, "fp16", "adam") if s[0] == "3d"]
    layouts = {(s[3], s[5][0], s[5][1]) for s in specs}  # (data, tensor, stages)
    assert layouts == {(16 // (t * k), t, k) for t in (1, 2, 4, 8, 16) for k in (1, 2, 4, 8, 16)
                       if t * k <= 16 and (k >= 2 or t >= 2)}

    def expected(d, t, k):
        n = 0
        for s in range(1, 64 // d + 1):
            if (64 // d) % s:
                continue
            vs = 1 + (sum(1 for v in range(2, 9) if (8 // k) % v == 0 and 8 % k == 0) if s % k == 0 and k >= 2 else 0)
            n += vs * len(RECOMPUTE_CHOICES) * (2 if t > 1 else 1) * (2 if d > 1 else 1)
        return n
    assert len(specs) == sum(expected(d, t, k) for d, t, k in layouts)
    assert ("3d", "data+tensor+pipeline", 16, 1, 16, (2, 8, 8, 1, "selective", True, 0)) in specs
    assert ("3d", "data+tensor+pipeline", 16, 2, 8, (2, 4, 8, 2, "full", False, 1)) in specs  # 8 layers: 4 x 2
    base = dict(batch=64, devices_per_node=8, dtype="fp16", optimizer="adam")
    plan = spec_plan(("3d", "data+tensor+pipeline", 16, 1, 16, (2, 8, 64, 1, "full", False, 0)), base)
    assert (plan.p_data, plan.p_tensor, plan.stages, plan.micro_batches, plan.recompute, plan.schedule) == (
        1, 2, 8, 64, True, "1f1b")
    plan = spec_plan(("3d", "data+tensor+pipeline", 16, 2, 8, (2, 4, 8, 2, "selective", True, 1)), base)
    assert (plan.schedule, plan.virtual_stages, plan.recompute, plan.recompute_granularity, plan.sequence_parallel,
            plan.zero_stage) == ("interleaved", 2, True, "selective", True, 1)
    assert not spec_plan(("3d", "data+tensor+pipeline", 16, 1, 16, (2, 8, 64, 1, "none", False, 0)), base).recompute
    for cnn in ("vgg16", "resnet50"):
        assert megatron_3d_shape(load_model(cnn)) == (0, 0)
        assert not [s for s in candidate_specs(load_model(cnn), 64, range(1, 17), 8, "fp32", "sgd") if s[0] == "3d"]


def test_search_returns_a_data_tensor_pipeline_plan_where_it_is_best():
    """The GPT_3D search's best plan is Megatron's layout with a pipeline split (data and data+tensor do not fit,
    GPipe's pipeline keeps every micro-batch in flight), and the runner-up has both a tensor and a pipeline split,
    within 5% of it (1.3% with the family scales of 2026-12-06, 2.2% with vTrain's measured 2-GPU all-reduce
    bandwidth, 3.5% with measured GEMM rates net of the launch floor); the plan-by-plan walk agrees."""
    graph, cm = load_model("gpt", **GPT_3D), kernels_only(load_cost_model("a100-dgx-8gpu.published")[0])
    fast = search(graph, cm, **GPT_3D_SEARCH)
    best = fast.best[0].plan
    assert best.strategy == "data+tensor+pipeline" and best.stages > 1
    runner_up = fast.best[1]
    assert runner_up.plan.p_tensor > 1 and runner_up.plan.stages > 1
    assert runner_up.iteration_s <= 1.05 * fast.best[0].iteration_s
    assert fast.best[0].fits and "data+tensor+pipeline" in fast.best_by_strategy
    exhaustive = search(graph, cm, exhaustive=True, **GPT_3D_SEARCH)
    assert fast.pruned > 0
    _same(exhaustive, fast)


def test_a_cost_model_of_unknown_sign_prunes_on_memory_only():
    from predictor.search_fast import costs_nonnegative
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph
    cm = FlatCostModel(call_s=1e-3)
    assert not costs_nonnegative(cm) and costs_nonnegative(load_cost_model(None)[0])
    common = dict(batch=8, max_devices=6, devices_per_node=2, memory_cap_bytes=0.6e6, top=20, interval=False)
    _same(search(conv_chain_graph(), cm, exhaustive=True, **common), search(conv_chain_graph(), cm, **common))


@pytest.mark.parametrize("model, batch, max_devices, profile", [
    ("resnet50", 256, 24, None), ("small_cnn3d", 32, 32, None), ("vgg16", 64, 16, "a100-dgx-8gpu.published"),
    ("small_cnn2d", 64, 12, "cpu"), ("gpt", 32, 16, "a100-dgx-8gpu.published")])
def test_every_bound_is_below_the_evaluation(model, batch, max_devices, profile):
    """The registry's bounds the fast search prunes with, on every candidate, against the exact evaluation (with the
    refinements it applies before evaluating); and what it settles as infeasible is infeasible
    (test_search_bounds.check_bounds, which also draws random nets and options)."""
    from tests.predictor.test_search_bounds import check_bounds
    cm = _hybrid_cpu_model() if profile == "cpu" else load_cost_model(profile)[0]
    assert check_bounds(load_model(model), cm, batch=batch, devices=range(1, max_devices + 1),
                        devices_per_node=cm.devices_per_node, cap=float("inf")) > 20


def test_plans_scoring_above_the_final_cut_never_change_the_ranking():
    """Why feeding only the evaluated plans (in candidate order) gives the exhaustive ranking: a plan whose
    score exceeds the final top-k cut can be left out without changing which plans the heap keeps or their
    order, ties included (they go to the plan fed first)."""
    rng = random.Random(7)
    for _ in range(3000):
        k, n = rng.randint(1, 5), rng.randint(1, 14)
        scores = [rng.randint(0, 3) for _ in range(n)]

        def ranked(keep):
            ranking = Ranking("time", 1, k)
            for index in keep:
                ranking.add(index, _Pred(scores[index], index))
            return [p.index for p in ranking.best()]

        full = ranked(range(n))
        cut = max(scores[i] for i in full)
        assert ranked([i for i in range(n) if scores[i] <= cut or rng.random() < 0.5]) == full


class _Pred:
    """Just what Ranking reads of a Prediction."""

    def __init__(self, iteration_s, index):
        self.iteration_s, self.index = iteration_s, index
        self.plan = _Plan()


class _Plan:
    strategy, devices = "data", 1


def test_the_planner_keeping_every_block_is_what_the_enumeration_finds():
    """predictor.outofcore._exhaustive returns all-keep at once when it fits: the enumeration's choice too."""
    import itertools

    from predictor import outofcore
    from predictor.blocks import Block
    rng = random.Random(3)
    for _ in range(200):
        blocks = [Block(name=str(i), fwd_s=rng.choice([0.0, rng.random()]), bwd_s=rng.random(),
                        activation_bytes=rng.randint(0, 5), input_bytes=rng.randint(0, 5)) for i in range(rng.randint(1, 5))]
        swap = [rng.choice([0.0, rng.random()]) for _ in blocks]
        budget = rng.randint(0, 30)
        options = [outofcore._option_costs(b, s) for b, s in zip(blocks, swap)]
        expected, key = None, None
        for choices in itertools.product(outofcore.CHOICES, repeat=len(blocks)):
            if outofcore.activation_peak_bytes(blocks, choices) > budget:
                continue
            k = (sum(options[i][c][0] for i, c in enumerate(choices)), [outofcore.CHOICES.index(c) for c in choices])
            if key is None or k < key:
                expected, key = choices, k
        assert outofcore._exhaustive(blocks, budget, swap) == expected


def test_the_programme_keeping_every_block_is_what_it_computes():
    """predictor.outofcore._dynamic_programme returns all-keep at once when that is what it would compute."""
    from predictor import outofcore
    from predictor.blocks import Block
    rng = random.Random(5)
    shortcuts = 0
    for _ in range(400):
        blocks = [Block(name=str(i), fwd_s=rng.choice([0.0, rng.random()]), bwd_s=rng.random(),
                        activation_bytes=rng.choice([0, rng.randint(1, 9)]), input_bytes=rng.randint(0, 9))
                  for i in range(rng.randint(1, 12))]
        swap = [rng.choice([0.0, rng.random()]) for _ in blocks]
        budget, resolution = rng.randint(0, 60), rng.choice([7, 16, 64])
        fast = outofcore._dynamic_programme(blocks, budget, swap, resolution)
        assert fast == outofcore._dynamic_programme(blocks, budget, swap, resolution, shortcut=False)
        shortcuts += fast == (outofcore.KEEP,) * len(blocks)
    assert shortcuts > 50


#: a GPT whose 3-D space has every dimension Megatron runs: interleaving (8 layers), sequence parallelism (t > 1),
#: ZeRO-1 (replicas), no / selective / full recomputation, micro-batch counts; memory caps that make some of each fit
MEGATRON_SPACE = [(dict(layers=8, hidden=512, heads=8, seq=256, vocab=1024, attention="fused-softmax",
                        residual="bias-dropout-add"), dict(batch=32, max_devices=16, memory_cap_bytes=2.5e8)),
                  (dict(layers=4, hidden=256, heads=4, seq=128, vocab=512, attention="fused-softmax"),
                   dict(batch=16, min_devices=4, max_devices=24, memory_cap_bytes=4e7, objective="cost"))]


@pytest.mark.parametrize("knobs, options", MEGATRON_SPACE, ids=["gpt8-time", "gpt4-cost"])
def test_fast_search_over_megatrons_space_ranks_as_evaluating_every_plan(knobs, options):
    """With interleaving, sequence parallelism, ZeRO-1 and selective/full recomputation in the 3-D space, the bounded
    walk (layouts bounded together, expanded in turn; the ZeRO-1 memory bound) returns what evaluating every plan
    returns; a ZeRO-1 plan is among the fitting 3-D plans, so its memory bound is exercised."""
    graph, cm = load_model("gpt", **knobs), load_cost_model("a100-80gb-dgx-8gpu.published")[0]
    common = dict(dtype="fp16", optimizer="adam", top=20, interval=False, framework="no-overlap", **options)
    exhaustive = search(graph, cm, exhaustive=True, **common)
    fast = search(graph, cm, **common)
    assert fast.pruned > 0 and exhaustive.best
    _same(exhaustive, fast)
    assert any(p.plan.strategy == "data+tensor+pipeline" for p in exhaustive.best)
    # with the overlaps Megatron-Core runs (each where a layout allows it): the same, and never slower
    overlaps = dict(common, tp_comm_overlap=True, overlap_param_gather=True)
    overlapped = search(graph, cm, **overlaps)
    _same(search(graph, cm, exhaustive=True, **overlaps), overlapped)
    if options.get("objective", "time") == "time":
        assert overlapped.best[0].iteration_s <= exhaustive.best[0].iteration_s


def test_the_zero1_memory_bound_holds_where_the_old_one_did_not():
    """ZeRO-1 shards the optimizer state and fp32 master weights over the replicas, so a 3-D plan can hold less than
    the parameter state of total / (t · K) parameters: the old bound (param_bytes / inner) exceeds such a plan's
    memory, the revised one (strategies.hybrid3d.lower_bound's) does not."""
    from predictor.memory import parameter_bytes
    from predictor.plan import Plan
    from predictor.search_fast import costs_nonnegative
    from predictor.strategies.bounds import Bounds
    from predictor.strategies.hybrid3d import lower_bound
    graph = load_model("gpt", layers=4, hidden=512, heads=8, seq=128, vocab=1024)
    cm = load_cost_model("a100-80gb-dgx-8gpu.published")[0]
    ctx = Context(graph, cm)
    template = Plan("data", batch=64, devices=1, devices_per_node=8, dtype="fp16", optimizer="adam")
    bounds = Bounds(ctx, template, float("inf"), costs_nonnegative(cm))
    plan = Plan("data+tensor+pipeline", batch=64, devices=32, devices_per_node=8, p_data=8, p_tensor=2, stages=2,
                micro_batches=8, dtype="fp16", optimizer="adam", schedule="1f1b", zero_stage=1)
    pred = evaluate(ctx, plan, 80e9)
    param_bytes = sum(parameter_bytes(ctx.total_params, "fp16", "adam"))
    assert pred.feasible and pred.memory_bytes < param_bytes / 4  # the old bound would have pruned it
    _, memory, _ = lower_bound(bounds, plan.strategy, 32, 8, 4, (2, 2, 8, 1, "none", False, 1))
    assert memory <= pred.memory_bytes
