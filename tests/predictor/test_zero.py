"""Sharded data parallelism (plan.zero_stage, predictor.strategies.data): memory per device against the ZeRO paper's
formulas (Rajbhandari et al., SC'20 §5: (2 + 2 + K)Ψ, 2Ψ + 2Ψ + KΨ/N, 2Ψ + (2 + K)Ψ/N, (2 + 2 + K)Ψ/N, here with
fp32 gradients: 4Ψ instead of 2Ψ), and its collectives."""
from __future__ import annotations

import pytest

from predictor.api import load_model, predict
from predictor.plan import Plan
from predictor.synthetic import SyntheticCostModel

N = 16


@pytest.fixture(scope="module")
def graph():
    return load_model("vgg16", width=4, fc=64, image=32, num_classes=10)


def _pred(graph, stage, cm=None, dtype="fp16", batch=64, micro_batches=1):
    plan = Plan("data", batch=batch, devices=N, devices_per_node=8, p_data=N, dtype=dtype, optimizer="adam",
                zero_stage=stage, micro_batches=micro_batches)
    pred = predict(graph, plan, cm or SyntheticCostModel(), interval=False)
    assert pred.feasible, pred.reason
    return pred


@pytest.mark.parametrize("stage, expected", [(0, lambda P: 2 * P + 4 * P + 12 * P),
                                             (1, lambda P: 2 * P + 4 * P + 12 * P / N),
                                             (2, lambda P: 2 * P + (4 + 12) * P / N),
                                             (3, lambda P: (2 + 4 + 12) * P / N)])
def test_model_state_bytes_by_stage(graph, stage, expected):
    pred = _pred(graph, stage)
    P = graph.params
    assert pred.weights_bytes + pred.grads_bytes + pred.optimizer_bytes == pytest.approx(expected(P))


def test_fp32_stage1_keeps_the_weights(graph):
    pred = _pred(graph, 1, dtype="fp32")
    P = graph.params
    assert pred.weights_bytes == pytest.approx(4 * P) and pred.optimizer_bytes == pytest.approx(8 * P / N)


def test_stages_1_2_gather_the_updated_weights(graph):
    cm = SyntheticCostModel()
    pred = _pred(graph, 2, cm)
    assert pred.comm_exposed_s["layer_collective"] == pytest.approx(
        cm.collective_time_s("allgather", graph.params * 2.0, N, 2))
    assert pred.update_s < _pred(graph, 0, cm).update_s  # each replica updates its shard


def test_stage3_exposes_the_gathers_compute_cannot_hide(graph):
    cm = SyntheticCostModel(peak_flops_per_s=1e30, launch_s=0.0)  # no compute to hide behind
    pred = _pred(graph, 3, cm)
    gathers = sum(cm.collective_time_s("allgather", l.params * 2.0, N, 2) for l in graph.layers if l.params)
    scatter = sum(cm.collective_time_s("reduce_scatter", l.params * 4.0, N, 2) for l in graph.layers if l.params)
    # all exposed but what the (near-zero) element-wise layers hide
    assert pred.comm_exposed_s["gradient"] == pytest.approx(2 * gathers + scatter, rel=1e-4)
    assert pred.comm_hidden_s["gradient"] == pytest.approx(0.0, abs=1e-4 * gathers)


def test_zero_is_a_no_op_on_one_replica(graph):
    plan = Plan("data", batch=64, devices=1, devices_per_node=1, dtype="fp16", optimizer="adam", zero_stage=3)
    base = Plan("data", batch=64, devices=1, devices_per_node=1, dtype="fp16", optimizer="adam")
    cm = SyntheticCostModel()
    assert predict(graph, plan, cm, interval=False).iteration_s == predict(graph, base, cm, interval=False).iteration_s


def test_gradient_accumulation_runs_micro_batches_and_syncs_as_each_stage_does(graph):
    """k micro-batches of b/k: k times one micro-batch's compute and activations of one; DDP (no_sync) reduces once,
    ZeRO 2 reduce-scatters and ZeRO 3 gathers and reduce-scatters in every micro-batch (method.md §9)."""
    cm, k = SyntheticCostModel(), 4
    one = {stage: _pred(graph, stage, cm, batch=64 // k) for stage in (0, 2, 3)}
    acc = {stage: _pred(graph, stage, cm, micro_batches=k) for stage in (0, 2, 3)}
    for stage in (0, 2, 3):
        assert acc[stage].compute_fwd_s == pytest.approx(k * one[stage].compute_fwd_s)
        assert acc[stage].compute_bwd_s == pytest.approx(k * one[stage].compute_bwd_s)
        assert acc[stage].activations_bytes == pytest.approx(one[stage].activations_bytes)
    sync = lambda p: p.comm_exposed_s["gradient"] + p.comm_hidden_s["gradient"]  # noqa: E731
    assert sync(acc[0]) == pytest.approx(sync(one[0]))
    for stage in (2, 3):
        assert acc[stage].comm_exposed_s["gradient"] == pytest.approx(k * one[stage].comm_exposed_s["gradient"])
        assert sync(acc[stage]) == pytest.approx(k * sync(one[stage]))
    # stage 3 with nothing to hide behind: every micro-batch's two gathers and reduce-scatter exposed
    fast = SyntheticCostModel(peak_flops_per_s=1e30, launch_s=0.0)
    gathers = sum(fast.collective_time_s("allgather", l.params * 2.0, N, 2) for l in graph.layers if l.params)
    scatter = sum(fast.collective_time_s("reduce_scatter", l.params * 4.0, N, 2) for l in graph.layers if l.params)
    assert _pred(graph, 3, fast, micro_batches=k).comm_exposed_s["gradient"] == pytest.approx(
        k * (2 * gathers + scatter), rel=1e-4)


def test_gradient_accumulation_needs_whole_micro_batches(graph):
    plan = Plan("data", batch=64, devices=N, devices_per_node=8, p_data=N, dtype="fp16", micro_batches=3)
    pred = predict(graph, plan, SyntheticCostModel(), interval=False)
    assert not pred.feasible and "gradient-accumulation micro-batches" in pred.reason


def test_micro_batches_reach_data_and_recompute_plans(graph):
    """`--micro-batches` sets gradient accumulation on serial, data and their +recompute plans (api.default_plans);
    a checkpointed replica recomputes in every micro-batch."""
    from predictor.api import default_plans
    for strategy in ("serial", "data", "data+recompute", "serial+recompute"):
        (plan,) = default_plans(graph, strategy, 64, N, 8, "fp16", "adam", micro_batches=4)
        assert plan.micro_batches == 4 and "ga4" in plan.describe()
    (one,) = default_plans(graph, "data+recompute", 16, N, 8, "fp16", "adam")
    (acc,) = default_plans(graph, "data+recompute", 64, N, 8, "fp16", "adam", micro_batches=4)
    cm = SyntheticCostModel()
    p1, p4 = (predict(graph, p, cm, interval=False) for p in (one, acc))
    assert p4.recompute_s == pytest.approx(4 * p1.recompute_s) and p4.activations_bytes == pytest.approx(
        p1.activations_bytes)


def test_hsdp_shards_inside_a_group_and_all_reduces_the_shard_across_groups(graph):
    """FSDP's HYBRID_SHARD (Plan.shard_group S): model state sharded over S replicas, not all N; the gathers and
    reduce-scatters inside a group (one node here), then each shard all-reduced over the N / S groups, by hand with
    nothing to hide behind (PyTorch FSDP API: HYBRID_SHARD "FULL_SHARD within a node, and replicate parameters across
    nodes")."""
    S = 8
    fast = SyntheticCostModel(peak_flops_per_s=1e30, launch_s=0.0)
    plan = Plan("data", batch=64, devices=N, devices_per_node=8, p_data=N, dtype="fp16", optimizer="adam",
                zero_stage=3, shard_group=S)
    pred = predict(graph, plan, fast, interval=False)
    assert pred.feasible, pred.reason
    P = graph.params
    assert pred.weights_bytes + pred.grads_bytes + pred.optimizer_bytes == pytest.approx((2 + 4 + 12) * P / S)
    gathers = sum(fast.collective_time_s("allgather", l.params * 2.0, S, 1) for l in graph.layers if l.params)
    scatter = sum(fast.collective_time_s("reduce_scatter", l.params * 4.0, S, 1) for l in graph.layers if l.params)
    # the 8 groups of a node all-reduce at once, each over an eighth of its network (layout.data_network_share)
    allreduce = sum(fast.collective_time_s("allreduce", l.params * 4.0 / S * 8, N // S, 2) for l in graph.layers
                    if l.params)
    assert pred.comm_exposed_s["gradient"] == pytest.approx(2 * gathers + scatter + allreduce, rel=1e-4)
    assert pred.details["shard_group"] == S and "hsdp8" in plan.describe()
    for bad in (dict(zero_stage=2), dict(shard_group=3)):  # HSDP needs ZeRO 3 over whole groups
        wrong = predict(graph, Plan(**{**plan.__dict__, **bad}), fast, interval=False)
        assert not wrong.feasible and "HSDP" in wrong.reason
