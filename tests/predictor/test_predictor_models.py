"""Model input: zoo modules, the meta-device tracer, user callables and files, the layer spec."""
import json
import math

import pytest

from predictor.api import load_model
from predictor.zoo import build
from profiler.errors import UserError

# parameter counts of the torchvision definitions (Inception-v3 without its auxiliary classifier;
# SE-ResNeXt-101 32x4d, not in torchvision: its ResNeXt plus an SE module reducing 16-fold in every block)
PARAMS = {"resnet50": 25_557_032, "resnet101": 44_549_160, "resnet152": 60_192_808, "vgg16": 138_357_544,
          "alexnet": 61_100_840, "inception_v3": 23_834_568, "resnext101_32x4d": 44_177_704,
          "se_resnext101_32x4d": 48_955_416, "efficientnet_b0": 5_288_548, "efficientnet_b4": 19_341_616}
# the counts the papers and benchmark suites publish (millions), met within 1%
PUBLISHED_MILLIONS = {"resnet101": 44.5, "resnext101_32x4d": 44.2, "se_resnext101_32x4d": 49.0,
                      "efficientnet_b0": 5.29, "efficientnet_b4": 19.3}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_zoo_matches_reference_parameter_counts(name):
    graph = load_model(name)
    assert graph.params == PARAMS[name]
    assert not graph.unsupported


@pytest.mark.parametrize("name", sorted(PUBLISHED_MILLIONS))
def test_benchmark_cnns_match_published_parameter_counts(name):
    module, _ = build(name)
    params = sum(p.numel() for p in module.parameters())
    assert params == pytest.approx(PUBLISHED_MILLIONS[name] * 1e6, rel=0.01)


def test_efficientnet_mbconv_ops_and_shapes():
    graph = load_model("efficientnet_b0", width=0.25, depth=0.5, image=64, num_classes=10)
    assert not graph.unsupported and graph.input_shape == (3, 64, 64)
    assert {"silu", "sigmoid", "bcast", "add", "dropout"} <= {l.op for l in graph.layers}
    depthwise = [l for l in graph.layers if l.op == "conv2d" and l.groups > 1]
    assert depthwise and all(l.groups == l.channels_in == l.channels_out for l in depthwise)
    assert {l.kernel for l in depthwise} == {(3, 3), (5, 5)}
    gate = next(l for l in graph.layers if l.op == "bcast")  # x times its squeeze-and-excitation scale (broadcast)
    by_name = {l.name: l for l in graph.layers}
    assert len(gate.inputs) == 2 and by_name[gate.inputs[1]].op == "sigmoid"
    assert by_name[gate.inputs[1]].output_shape == (gate.output_shape[0], 1, 1)
    assert gate.input_shape == gate.output_shape
    assert (gate.flops_fwd, gate.flops_bwd_data) == (gate.output_elems, 2 * gate.output_elems)
    assert load_model("efficientnet_b4", width=0.25, depth=0.5, image=64).input_shape == (3, 64, 64)
    assert load_model("efficientnet_b4").input_shape == (3, 380, 380)


def test_resnext_groups_and_se_blocks():
    plain = load_model("resnext101_32x4d", width=16, groups=4, image=64, num_classes=10)
    se = load_model("se_resnext101_32x4d", width=16, groups=4, image=64, num_classes=10)
    assert not plain.unsupported and not se.unsupported
    grouped = [l for l in plain.layers if l.op == "conv2d" and l.groups > 1]
    assert len(grouped) == 3 + 4 + 23 + 3 and all(l.groups == 4 and l.kernel == (3, 3) for l in grouped)
    assert grouped[0].channels_in == 4 * (16 * 4 // 64)  # groups x one channel each at this width
    # the gates as broadcast products, except where a 2 x 2 map makes the gate a quarter of the output (BROADCAST_SHARE)
    gates = [l for l in se.layers if l.op in ("bcast", "mul")]
    assert len(gates) == sum(l.op == "sigmoid" for l in se.layers) == 33
    assert all((l.op == "bcast") == (l.output_shape[1] * l.output_shape[2] >= 8) for l in gates)
    assert [l.op for l in plain.layers if l.op in ("mul", "bcast")] == []


def test_silu_sigmoid_and_mul_trace_in_every_form(tmp_path):
    path = tmp_path / "gates.py"
    path.write_text("import torch, torch.nn as nn, torch.nn.functional as F\n"
                    "class Net(nn.Module):\n"
                    "    def __init__(self):\n"
                    "        super().__init__()\n"
                    "        self.conv, self.act, self.gate = nn.Conv2d(3, 4, 3), nn.SiLU(), nn.Sigmoid()\n"
                    "    def forward(self, x):\n"
                    "        y = self.act(self.conv(x))\n"
                    "        z = F.silu(y) * torch.sigmoid(y)\n"
                    "        return torch.mul(z.mul(self.gate(z)), 0.5).sigmoid().flatten(1)\n"
                    "def model():\n"
                    "    return Net()\n")
    graph = load_model(f"{path}:model", input_shape=(3, 8, 8))
    assert not graph.unsupported
    assert [l.op for l in graph.layers] == ["conv2d", "silu", "silu", "sigmoid", "mul", "sigmoid", "mul", "scale",
                                            "sigmoid", "flatten"]
    assert [len(l.inputs) for l in graph.layers if l.op in ("mul", "scale")] == [2, 2, 1]


def test_resnet50_flops_and_shapes():
    graph = load_model("resnet50")
    # 4.09 G multiply-adds per 224x224 image in conv + fc layers = 8.18 GFLOP
    gemm_flops = sum(l.flops_fwd for l in graph.layers if l.op in ("conv2d", "linear"))
    assert gemm_flops == pytest.approx(8.18e9, rel=0.01)
    conv1 = graph.layers[0]
    assert (conv1.op, conv1.input_shape, conv1.output_shape, conv1.kernel, conv1.stride) == \
        ("conv2d", (3, 224, 224), (64, 112, 112), (7, 7), (2, 2))
    assert conv1.halo_width == (3, 3)
    assert conv1.flops_bwd_weight == conv1.flops_fwd
    adds = [l for l in graph.layers if l.op == "add"]
    assert len(adds) == 16 and all(len(l.inputs) == 2 for l in adds)


def test_cosmoflow_is_3d_and_scales_down():
    graph = load_model("cosmoflow", width=4, blocks=3, image=32, fc=32)
    conv = graph.layers[0]
    assert conv.op == "conv3d" and conv.input_shape == (4, 32, 32, 32) and conv.halo_width == (1, 1, 1)
    assert graph.params == sum(l.params for l in graph.layers) > 0


def test_ssd300_maps_boxes_and_parameters_by_hand():
    """MLPerf's SSD300: ResNet-34 to its third stage at stride 1 (38 x 38 x 256 at 300 x 300), extras down to 19, 10,
    5, 3, 1; 4/6/6/6/4/4 default boxes = 8732. Parameters: backbone 8,170,304 (conv1 9,408 + bn 128, stage 1
    221,952, stage 2 1,116,416, stage 3 6,822,400), extras 3,577,088, box heads 387,192, class heads (81) 7,840,638."""
    import torch
    from predictor.zoo.ssd import ssd300
    graph = load_model("ssd300")
    assert graph.params == 8_170_304 + 3_577_088 + 387_192 + 7_840_638 and not graph.unsupported
    heads = [l for l in graph.layers if l.op == "conv2d" and l.output_shape[0] in (16, 24, 324, 486)]
    assert sorted({l.output_shape[-1] for l in heads}) == [1, 3, 5, 10, 19, 38]
    with torch.no_grad():
        out = ssd300(width=8, image=300).eval()(torch.zeros(1, 3, 300, 300))
    assert out.shape == (1, 4 + 81, 8732)


def test_user_file_and_package_callables(tmp_path):
    path = tmp_path / "mynet.py"
    path.write_text("import torch.nn as nn\n"
                    "def model(width=4):\n"
                    "    net = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(width * 64, 2))\n"
                    "    net.input_shape = (3, 8, 8)\n"
                    "    return net\n")
    graph = load_model(f"{path}:model", width=6)
    assert [l.op for l in graph.layers] == ["conv2d", "relu", "flatten", "linear"]
    assert graph.layers[0].output_shape == (6, 8, 8)
    packaged = load_model("predictor.zoo.small:small_cnn2d", input_shape=(3, 32, 32))
    assert packaged.params == load_model("small_cnn2d").params


def test_unsupported_layers_are_reported_by_name(tmp_path):
    path = tmp_path / "hardswish.py"
    path.write_text("import torch.nn as nn\n"
                    "def model():\n"
                    "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Hardswish(), nn.Flatten())\n")
    graph = load_model(f"{path}:model", input_shape=(3, 8, 8))
    assert graph.unsupported == ("1 (Hardswish)",)


def test_untraceable_module_is_a_user_error(tmp_path):
    path = tmp_path / "branchy.py"
    path.write_text("import torch.nn as nn\n"
                    "class Net(nn.Module):\n"
                    "    def __init__(self):\n"
                    "        super().__init__(); self.conv = nn.Conv2d(3, 4, 3)\n"
                    "    def forward(self, x):\n"
                    "        return self.conv(x) if x.sum() > 0 else x\n"
                    "def model():\n"
                    "    return Net()\n")
    with pytest.raises(UserError, match="cannot trace model"):
        load_model(f"{path}:model", input_shape=(3, 8, 8))


def test_unknown_model_and_missing_callable():
    with pytest.raises(UserError, match="unknown model 'resnet51'"):
        load_model("resnet51")
    with pytest.raises(UserError, match="cannot import model"):
        load_model("no_such_package.mod:fn", input_shape=(3, 8, 8))


def test_layer_spec_json_with_residual_and_concat(tmp_path):
    spec = {"name": "branches", "input": [3, 16, 16], "layers": [
        {"name": "a", "op": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
        {"name": "b", "op": "conv2d", "filters": 8, "kernel": 3, "padding": 1, "inputs": [""]},
        {"name": "sum", "op": "add", "inputs": ["a", "b"]},
        {"name": "cat", "op": "concat", "inputs": ["sum", "a"]},
        {"name": "pool", "op": "maxpool", "kernel": 2},
        {"name": "flat", "op": "flatten"},
        {"name": "fc", "op": "linear", "out": 10}]}
    path = tmp_path / "branches.json"
    path.write_text(json.dumps(spec))
    graph = load_model(str(path))
    shapes = {l.name: l.output_shape for l in graph.layers}
    assert shapes["cat"] == (16, 16, 16) and shapes["pool"] == (16, 8, 8) and shapes["flat"] == (1024,)
    assert graph.params == (8 * 3 * 9 + 8) * 2 + 1024 * 10 + 10
    assert math.isclose(graph.layers[0].flops_fwd, 2 * 3 * 9 * 8 * 256)


@pytest.mark.parametrize("layers, message", [
    ([{"name": "x", "op": "gelu"}], "unsupported op 'gelu'"),
    ([{"name": "c", "op": "conv2d", "filters": 0}], "filters must be a positive integer"),
    ([{"name": "s", "op": "add", "inputs": ["nope"]}], "input 'nope' is not an earlier layer"),
])
def test_layer_spec_errors_name_the_layer(tmp_path, layers, message):
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps({"input": [3, 8, 8], "layers": layers}))
    with pytest.raises(UserError, match=message):
        load_model(str(path))


def test_cosmoflow_kernel_2_pads_then_convolves_as_tensorflow_does():
    """MLPerf HPC v0.7's CosmoFlow (kernel_size=2, padding 'same'): each block pads its input by one at the far end (a
    copy), then a 2 x 2 x 2 convolution keeps the side; forward FLOPs 2 s^3 F C k^3 per block, by hand."""
    for kernel in (2, 3):
        graph = load_model("cosmoflow", kernel=kernel)
        convs = [l for l in graph.layers if l.op == "conv3d"]
        pads = [l for l in graph.layers if l.op == "copy"]
        assert len(convs) == 5 and len(pads) == (5 if kernel == 2 else 0) and not graph.unsupported
        c, flops = 4, 0
        for k, conv in enumerate(convs):
            side, f = 128 // 2 ** k, 32 * 2 ** k
            assert conv.output_shape == (f, side, side, side) and conv.kernel == (kernel,) * 3
            flops += 2 * side ** 3 * f * c * kernel ** 3
            c = f
        assert sum(l.flops_fwd for l in convs) == flops
        if kernel == 2:
            assert pads[0].output_shape == (4, 129, 129, 129)
    with pytest.raises(UserError, match=r"cosmoflow: bad knob \(kernel\): kernel must be 2 or 3"):
        load_model("cosmoflow", kernel=5)
