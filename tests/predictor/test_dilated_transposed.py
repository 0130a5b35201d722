"""Dilated and transposed convolutions (DeepCAM's ASPP and decoder): traced with their geometry, costed as the
undilated convolution of the same implicit GEMM and as the convolution whose passes a transposed one runs."""

import pytest
import torch.nn as nn

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.graph import ModelGraph
from predictor.layercost import LayerCoster, Split, _pass_params, undilated
from predictor.trace import trace_module
from tests.kernels_only import kernels_only

PROFILE = shipped_profile("a100-dgx-8gpu.published")


def _one(module: nn.Module, shape):
    graph = trace_module(nn.Sequential(nn.Conv2d(shape[0], shape[0], 1), module), shape)
    return graph, graph.layers[1]


def test_a_dilated_convolution_keeps_its_output_and_reaches_as_far_as_its_dilation():
    graph, layer = _one(nn.Conv2d(8, 16, 3, padding=4, dilation=4), (8, 20, 24))
    assert layer.dilation == (4, 4) and layer.output_shape == (16, 20, 24) and not layer.transposed
    assert layer.extent == (9, 9) and layer.halo_width == (4, 4)  # 'same' padding: (9 - 1) // 2 rows a side
    assert layer.flops_fwd == 2 * 8 * 16 * 9 * 20 * 24  # the kernel's 9 taps, not its 81-position extent
    op, params = _pass_params(layer, Split(2))
    # the undilated 3x3 convolution with the same output: padding 1 on the same input (M, N, K unchanged)
    assert (op, params["H"], params["W"], params["padding"], params["kernel"]) == ("conv2d", 20, 24, 1, 3)


def test_undilated_takes_what_padding_cannot_absorb_off_the_input():
    # 3x3, dilation 3, no padding: a 7-wide window leaves 10 outputs of 16, an undilated 3x3 does so on 12
    assert undilated((16,), (3,), (0,), (3,)) == ((12,), (0,))
    assert undilated((16,), (3,), (2,), (2,)) == ((16,), (1,))
    for x, k, p, d in [(16, 3, 0, 3), (16, 3, 2, 2), (33, 5, 1, 3), (10, 2, 1, 3)]:
        (x2,), (p2,) = undilated((x,), (k,), (p,), (d,))
        assert x + 2 * p - d * (k - 1) == x2 + 2 * p2 - (k - 1)  # the same output size


def test_a_transposed_convolution_runs_its_convolutions_passes_swapped(monkeypatch):
    graph, layer = _one(nn.ConvTranspose2d(256, 128, 3, stride=2, padding=1, output_padding=1, bias=False),
                        (256, 48, 72))
    assert layer.transposed and layer.output_shape == (128, 96, 144) and layer.params == 256 * 128 * 9
    assert layer.flops_fwd == 2 * 256 * 128 * 9 * 48 * 72  # every input position meets every tap once
    assert layer.halo_width == (1, 1)
    split = Split(16)
    op, params = _pass_params(layer, split)
    # the convolution from the (128, 96, 144) output to the (256, 48, 72) input, stride 2
    assert (op, params["C"], params["F"], params["H"], params["W"], params["stride"]) == ("conv2d", 128, 256, 96, 144, 2)
    cm = kernels_only(load_cost_model(PROFILE))
    seconds = {"fwd": 1e-3, "bwd_data": 2e-3, "bwd_weight": 4e-3}  # a pass each, told apart by its time
    seen = []
    monkeypatch.setattr(cm, "compute_time_s", lambda o, p, prm, dt: seen.append((o, p, prm)) or seconds[p])
    fwd, bwd = LayerCoster(ModelGraph("t", graph.input_shape, (graph.layers[0], layer)), cm, "fp16").times(1, split)
    assert fwd == pytest.approx(seconds["bwd_data"] + cm.framework_overhead_s("fwd"))
    assert bwd == pytest.approx(seconds["fwd"] + seconds["bwd_weight"] + cm.framework_overhead_s("bwd"))
    assert all((o, prm) == (op, params) for o, _, prm in seen)


def test_a_channel_split_of_a_transposed_convolution_divides_its_convolutions_filters():
    _, layer = _one(nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1), (32, 12, 18))
    _, params = _pass_params(layer, Split(1, channel_div=4))
    assert (params["C"], params["F"]) == (16, 8)
    _, params = _pass_params(layer, Split(1, filter_div=4))
    assert (params["C"], params["F"]) == (4, 32)


def test_the_runner_rebuilds_them_as_traced():
    import torch
    from predictor.runner.nets import build_layer
    for module, shape in [(nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), (8, 6, 10)),
                          (nn.Conv2d(8, 4, 3, padding=3, dilation=3, bias=False), (8, 12, 12))]:
        _, layer = _one(module, shape)
        rebuilt = build_layer(layer)
        assert type(rebuilt) is type(module) and rebuilt.dilation == module.dilation
        assert tuple(rebuilt(torch.zeros(1, *shape)).shape[1:]) == layer.output_shape
        assert sum(p.numel() for p in rebuilt.parameters()) == layer.params


def test_a_layer_spec_describes_them_as_the_tracer_does(tmp_path):
    import yaml
    from predictor.layerspec import load_layer_spec
    spec = {"input": [8, 12, 18], "layers": [
        {"name": "dw", "op": "conv2d", "filters": 8, "kernel": 3, "padding": 2, "dilation": 2, "groups": 8,
         "bias": False},
        {"name": "up", "op": "conv_transpose2d", "filters": 4, "kernel": 3, "stride": 2, "padding": 1,
         "output_padding": 1}]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    got = load_layer_spec(path).layers
    want = trace_module(nn.Sequential(nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8, bias=False),
                                      nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)),
                        (8, 12, 18)).layers[:2]  # the tracer appends its loss on the (4, 24, 36) output
    fields = ("op", "input_shape", "output_shape", "weight_shape", "params", "kernel", "stride", "padding", "groups",
              "dilation", "transposed", "flops_fwd", "flops_bwd_data", "flops_bwd_weight")
    assert [[getattr(l, f) for f in fields] for l in got] == [[getattr(l, f) for f in fields] for l in want]


def test_the_runner_trains_a_small_deepcam_from_its_graph():
    """The measured runner rebuilds DeepCAM from its traced graph (dilated, depthwise and transposed convolutions,
    the pooled branch broadcast back over the map) and runs a training step."""
    from predictor.runner.build import build_replica
    from predictor.runner.config import RunConfig
    from predictor.runner.nets import synthetic_batch
    from predictor.zoo import build
    module, shape = build("deepcam", width=2, image=32, in_channels=4)
    graph = trace_module(module, shape, "deepcam")
    replica = build_replica(RunConfig("deepcam", "serial", 1, 2), graph)
    loss = replica.forward(*synthetic_batch(graph, 2, seed=1))
    replica.backward(loss)
    grads = replica.serial_grads()
    assert loss.isfinite() and len(grads) == sum(1 for p in module.parameters()) and all(
        g.isfinite().all() for g in grads.values())


def test_deepcam_refuses_knobs_it_cannot_build():
    from predictor.zoo import build
    for knobs, words in [({"width": 0}, "width must be a positive integer"), ({"image": 100}, "multiple of 16"),
                         ({"classes": -1}, "classes must be")]:
        with pytest.raises(ValueError, match=words):
            build("deepcam", **knobs)
