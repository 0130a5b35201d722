"""A GPU layer pass takes its kernels' time or the host's time to issue it, whichever is longer (Coefficients.
host_dispatch, docs/method.md §3d); a step replayed as CUDA graphs (Plan.cuda_graphs) has no such floor, nor has a
CPU profile, where the host runs the kernels."""
from __future__ import annotations

from dataclasses import replace

import pytest

from calibrate.cost_model import load_cost_model
from calibrate.published import HOST_LAYER, NODES, build_profile
from predictor.api import load_model, predict
from predictor.layercost import LayerCoster, Split
from predictor.plan import Plan
from predictor.published.constants_fit import ScaledCostModel
from tests.kernels_only import kernels_only, with_coefficients

NODE = next(n for n in NODES if n.file == "a100-dgx-8gpu.published.yaml")


@pytest.fixture(scope="module")
def cm():
    return load_cost_model(build_profile(NODE, None))


@pytest.fixture(scope="module")
def graph():
    return load_model("small_cnn2d", width=4, image=16)


def test_published_profiles_carry_the_measured_host_time(cm):
    """13.5 us per forward and 25.4 us per backward: the slopes of the H200 node's framework chains."""
    assert cm.host_dispatch_s("fwd") == pytest.approx(13.5e-6) == pytest.approx(HOST_LAYER[0].value)
    assert cm.host_dispatch_s("bwd") == pytest.approx(25.4e-6) == pytest.approx(HOST_LAYER[1].value)


def test_tiny_layers_take_the_floor_and_large_ones_their_kernels(cm, graph):
    tiny = LayerCoster(graph, cm, "fp32")
    free = LayerCoster(graph, cm, "fp32", host_floor=False)
    costed = [i for i, layer in enumerate(graph.layers) if layer.op not in ("input", "flatten")]
    assert costed
    for i in costed:  # one sample of a 16x16 image, 4 channels: every kernel is a few microseconds
        f0, b0 = free.times(i, Split(n=1))
        f, b = tiny.times(i, Split(n=1))
        assert f0 < 13.5e-6 and f == pytest.approx(13.5e-6)
        assert b == (pytest.approx(25.4e-6) if b0 > 0 else 0.0)  # a layer without a backward keeps none
    big = LayerCoster(graph, cm, "fp32")
    conv = next(i for i, layer in enumerate(graph.layers) if layer.op == "conv2d")
    f_big, _ = big.times(conv, Split(n=65536))  # 65536 samples: its kernels take far longer than issuing them
    f_free, _ = free.times(conv, Split(n=65536))
    assert f_big == f_free > 13.5e-6


def test_cuda_graphs_and_cpu_profiles_have_no_floor(cm, graph, tmp_path):
    plan = Plan(strategy="serial", batch=1, devices=1, devices_per_node=8)
    floored = predict(graph, plan, cm)
    graphed = predict(graph, replace(plan, cuda_graphs=True), cm)
    layers = sum(1 for layer in graph.layers if layer.op not in ("input", "flatten"))
    assert floored.compute_fwd_s == pytest.approx(13.5e-6 * layers)
    assert graphed.compute_fwd_s < floored.compute_fwd_s / 2
    host = ScaledCostModel(cm, {}, {}, 0.0)
    assert host.host_dispatch_s("fwd") == cm.host_dispatch_s("fwd")  # refits keep the floor ...
    assert ScaledCostModel(cm, {}, {}, 0.0, host_floor=False).host_dispatch_s("fwd") == 0.0  # ... decompose drops it
    assert with_coefficients(cm, device_is_host=True).host_dispatch_s("fwd") == 0.0
    assert kernels_only(cm).host_dispatch_s("bwd") == 0.0


def test_a_node_with_its_own_host_figures_carries_them():
    """vTrain's node carries the figures fitted to its own runs (nodes.yaml), 3.92 x the shared ones with their
    range scaled alike; every other node the shared ones."""
    vtrain = next(n for n in NODES if n.file == "a100-40gb-4hdr-8gpu.published.yaml")
    own = load_cost_model(build_profile(vtrain, None))
    assert own.host_dispatch_s("fwd") == pytest.approx(vtrain.host_layer_forward.value) == pytest.approx(
        3.92 * HOST_LAYER[0].value, rel=0.01)
    assert own.host_dispatch_s("bwd") == pytest.approx(3.92 * HOST_LAYER[1].value, rel=0.01)
    assert vtrain.host_layer_backward.high == pytest.approx(3.92 * HOST_LAYER[1].high, rel=0.01)
    others = [n for n in NODES if n.host_layer_forward is not None and n is not vtrain]
    assert others == []


def test_a_node_given_one_host_figure_only_is_refused(tmp_path):
    """The two figures come from one fit: a nodes.yaml entry with one of them is a one-line error naming it."""
    import shutil

    from calibrate.systems import DATA_DIR, load_nodes
    from profiler.errors import UserError

    for name in ("figures.yaml", "gpus.yaml", "nodes.yaml", "vtrain_a100_allreduce.csv"):
        shutil.copy(DATA_DIR / name, tmp_path / name)
    text = (tmp_path / "nodes.yaml").read_text()
    start = text.index("  host_layer_backward:")
    end = text.index('"}\n', start) + 3
    (tmp_path / "nodes.yaml").write_text(text[:start] + text[end:])
    with pytest.raises(UserError, match=r"nodes.yaml: field 'a100-40gb-4hdr-8gpu': host_layer_forward and "
                                        r"host_layer_backward go together"):
        load_nodes(tmp_path)


def test_the_host_fit_finds_the_best_factor_and_scales_both_figures(cm):
    """predictor.published.host_fit: the golden-section search finds a known maximiser within its bracket (to 1%),
    and a factor scales the forward and backward figures and their ranges alike."""
    import copy
    import math

    from predictor.published.host_fit import best_scale, with_host_scale

    assert best_scale(lambda s: -(math.log(s) - math.log(3.2)) ** 2) == pytest.approx(3.2, rel=0.01)
    assert best_scale(lambda s: -s) == pytest.approx(1.0, rel=0.02)  # the bracket's end
    scaled = with_host_scale(copy.deepcopy(cm), [f.estimate() for f in HOST_LAYER], 2.5)
    assert scaled.host_dispatch_s("fwd") == pytest.approx(2.5 * 13.5e-6)
    assert scaled.host_dispatch_s("bwd") == pytest.approx(2.5 * 25.4e-6)
    assert scaled.coefficients.host_dispatch.backward_per_layer_s.high == pytest.approx(2.5 * HOST_LAYER[1].high)
    assert cm.host_dispatch_s("fwd") == pytest.approx(13.5e-6)  # the copy was scaled, not the original


def test_a_plan_whose_host_floor_dominates_names_host_dispatch_as_its_bottleneck():
    """predictor.host_bound: the step time the host floor adds is the plan's prediction less the same plan replayed
    as CUDA graphs (by hand); a tiny GPT on eight tensor ranks is host-bound, the same plan as CUDA graphs is not
    marked, and a CPU profile (no host floor) marks nothing."""
    from predictor.host_bound import host_line, mark_host_bound

    vtrain = next(n for n in NODES if n.file == "a100-40gb-4hdr-8gpu.published.yaml")
    gpu = load_cost_model(build_profile(vtrain, None))
    gpt = load_model("gpt", layers=2, hidden=256, heads=8, seq=128, vocab=1024)
    plan = Plan(strategy="data+tensor+pipeline", batch=8, devices=8, devices_per_node=8, dtype="fp16",
                optimizer="adam", p_tensor=8, p_data=1, stages=1, micro_batches=8, schedule="1f1b")
    pred = predict(gpt, plan, gpu)
    graphs = predict(gpt, replace(plan, cuda_graphs=True), gpu, interval=False)
    mark_host_bound([pred], gpt, gpu)
    assert pred.details["host_dispatch_s"] == pytest.approx(pred.iteration_s - graphs.iteration_s)
    assert pred.details["host_dispatch_s"] > 0.5 * pred.iteration_s
    assert pred.bottleneck == "host dispatch" and "--cuda-graphs" in host_line(pred)
    replayed = predict(gpt, replace(plan, cuda_graphs=True), gpu)
    mark_host_bound([replayed], gpt, gpu)
    assert "host_dispatch_s" not in replayed.details and replayed.bottleneck != "host dispatch"
    assert host_line(replayed) == ""
    cpu = with_coefficients(gpu, device_is_host=True)
    on_cpu = predict(gpt, plan, cpu)
    mark_host_bound([on_cpu], gpt, cpu)
    assert "host_dispatch_s" not in on_cpu.details


def test_the_host_share_comes_out_of_the_compute_term():
    """plan.bottleneck_label: details["host_dispatch_s"] is its own term and is taken out of the compute."""
    from predictor.plan import Prediction, bottleneck_label

    pred = Prediction(plan=Plan(strategy="serial", batch=1, devices=1, devices_per_node=1), compute_fwd_s=0.4, compute_bwd_s=0.6,
                      update_s=0.3)
    assert bottleneck_label(pred) == "compute"
    pred.details["host_dispatch_s"] = 0.6
    assert bottleneck_label(pred) == "host dispatch"  # 0.6 against compute 0.4 and update 0.3
    pred.details["host_dispatch_s"] = 0.2
    assert bottleneck_label(pred) == "compute"  # compute 0.8 left
