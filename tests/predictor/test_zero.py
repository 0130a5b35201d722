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


def _pred(graph, stage, cm=None, dtype="fp16"):
    plan = Plan("data", batch=64, devices=N, devices_per_node=8, p_data=N, dtype=dtype, optimizer="adam",
                zero_stage=stage)
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
