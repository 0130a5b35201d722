"""Pipeline schedules (predictor.strategies.pipeline): 1F1B and interleaved 1F1B against the published formulas
(Narayanan et al., SC'21 §2.2: bubble share (p - 1)/(m v); 1F1B keeps at most p micro-batches in flight; the
interleaved warm-up count of Megatron-LM's schedule), GPipe unchanged."""
from __future__ import annotations

from dataclasses import replace

import pytest

from predictor.api import load_model, predict
from predictor.plan import Plan
from predictor.strategies.pipeline import in_flight
from predictor.synthetic import SyntheticCostModel


def _plan(schedule="gpipe", K=4, S=8, v=1, **kw):
    return Plan("pipeline", batch=64, devices=K, devices_per_node=K, stages=K, micro_batches=S, schedule=schedule,
                virtual_stages=v, **kw)


@pytest.fixture(scope="module")
def graph():
    return load_model("vgg16", width=4, fc=64, image=32, num_classes=10)


def testin_flight_by_hand():
    assert [in_flight(_plan("1f1b", K=4, S=16), k) for k in range(4)] == [4, 3, 2, 1]
    assert [in_flight(_plan("1f1b", K=4, S=2), k) for k in range(4)] == [2, 2, 2, 1]
    assert [in_flight(_plan("gpipe", K=4, S=16), k) for k in range(4)] == [16] * 4
    # Megatron-LM interleaved: warm-up (K - k - 1) * 2 + (v - 1) * K chunk micro-batches, plus one
    assert [in_flight(_plan("interleaved", K=4, S=8, v=2), k) for k in range(4)] == [11, 9, 7, 5]
    assert in_flight(_plan("interleaved", K=4, S=4, v=2), 0) == 8  # at most S * v


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 4)])
def test_bubble_share(graph, schedule, v):
    K, S = 4, 8
    pred = predict(graph, _plan(schedule, K, S, v), SyntheticCostModel(), interval=False)
    assert pred.feasible, pred.reason
    if v > 1:
        assert pred.bubble_s / (pred.compute_fwd_s + pred.compute_bwd_s) == pytest.approx((K - 1) / (S * v))
        return
    # flow-shop fill and drain: sum over stages minus the slowest, at most the balanced (K - 1)/S share
    f, b = pred.details["stage_fwd_s"], pred.details["stage_bwd_s"]
    assert pred.bubble_s == pytest.approx(sum(f) + sum(b) - max(f) - max(b))
    assert pred.bubble_s / (pred.compute_fwd_s + pred.compute_bwd_s) <= (K - 1) / S + 1e-12


def test_1f1b_same_time_less_memory(graph):
    cm = SyntheticCostModel()
    g = predict(graph, _plan("gpipe", S=16), cm, interval=False)
    f = predict(graph, _plan("1f1b", S=16), cm, interval=False)
    assert f.iteration_s == pytest.approx(g.iteration_s)
    assert f.activations_bytes < g.activations_bytes
    # the first stage is the heaviest in both: 4 of 16 micro-batches held
    if g.details["memory_stage"] == f.details["memory_stage"] == 0:
        assert f.activations_bytes == pytest.approx(g.activations_bytes * 4 / 16)


def test_interleaved_p2p_crosses_v_times_the_boundaries(graph):
    cm = SyntheticCostModel(intra_bytes_per_s=1e30)  # every send/recv costs its latency alone
    K, S, v = 4, 8, 2
    g = predict(graph, _plan("gpipe", K, S), cm, interval=False).comm_exposed_s["pipeline_p2p"]
    i = predict(graph, _plan("interleaved", K, S, v), cm, interval=False).comm_exposed_s["pipeline_p2p"]
    assert g == pytest.approx(2 * (S + K - 2) * cm.alpha_s)
    assert i == pytest.approx(2 * (v * S + K - 2) * cm.alpha_s)


def test_interleaved_needs_micro_batches_a_multiple_of_the_stages(graph):
    pred = predict(graph, _plan("interleaved", K=4, S=6, v=2), SyntheticCostModel(), interval=False)
    assert not pred.feasible and "multiple" in pred.reason


def test_gpipe_is_the_default_and_unchanged(graph):
    plan = _plan()
    assert replace(plan, schedule="gpipe") == Plan("pipeline", batch=64, devices=4, devices_per_node=4, stages=4,
                                                   micro_batches=8)
    pred = predict(graph, plan, SyntheticCostModel(), interval=False)
    f, b = pred.details["stage_fwd_s"], pred.details["stage_bwd_s"]
    F, B = max(f), max(b)
    assert pred.compute_fwd_s + pred.compute_bwd_s + pred.bubble_s == pytest.approx(8 * (F + B) + sum(f) + sum(b)
                                                                                   - F - B)


def test_cli_schedule(capsys):
    import json

    from predictor.cli import main

    args = ["run", "--model", "small_cnn2d", "--batch", "32", "--gpus", "2", "--gpus-per-node", "2", "--strategy",
            "pipeline", "--micro-batches", "4", "--json"]
    assert main(args + ["--schedule", "interleaved", "--virtual-stages", "2"]) == 0
    plan = json.loads(capsys.readouterr().out)["predictions"][0]["plan"]
    assert (plan["schedule"], plan["virtual_stages"]) == ("interleaved", 2)
    assert main(args + ["--schedule", "1f1b"]) == 0
    plan = json.loads(capsys.readouterr().out)["predictions"][0]["plan"]
    assert (plan["schedule"], plan["virtual_stages"]) == ("1f1b", 1)
