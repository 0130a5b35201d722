"""A model written in primitive ops (TensorFlow's BERT: predictor.zoo.tf_ops) is traced kernel by kernel: unary
functions, scales by a number or a constant, broadcast products, reductions, random tensors and comparisons
(predictor.trace), each costed by the traffic its kernel moves (predictor.layercost)."""

import pytest
import torch
import torch.nn as nn

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.api import load_model
from predictor.graph import Layer, ModelGraph
from predictor.layercost import LayerCoster, Split
from predictor.trace import trace_module
from predictor.zoo import build
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

PROFILE = shipped_profile("v100-dgx1-1edr-8gpu.published")


class Primitives(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("adder", torch.zeros(1, 16))

    def forward(self, x):
        h = self.fc(x)
        g = 0.5 * (1.0 + torch.tanh(0.79 * (h + 0.044715 * torch.pow(h, 3))))  # BERT's TF GELU
        y = h * g
        mean = y.mean(-1, keepdim=True)
        z = torch.rsqrt((y - mean).mean(-1, keepdim=True) + 1e-12)
        keep = torch.rand_like(y) >= 0.1
        return (y * z) * 1.1 * keep.to(y.dtype) + self.adder


def test_primitives_trace_as_their_kernels():
    graph = trace_module(Primitives(), (8, 16))
    assert not graph.unsupported
    ops = [l.op for l in graph.layers]
    assert ops == ["linear", "pow", "scale", "add", "scale", "tanh", "scale", "scale", "mul", "mean", "scale",
                   "mean", "scale", "rsqrt", "random", "compare", "bcast", "scale", "flatten", "mul", "scale",
                   "cross_entropy"]  # the cast of the comparison is a view; the output keeps a token dimension
    by_op = {l.op: l for l in graph.layers}
    assert by_op["mean"].output_shape == (8, 1) and by_op["mean"].input_shape == (8, 16)
    bcast = next(l for l in graph.layers if l.op == "bcast")  # y * z: z (a per-row statistic) is 1/16 of the output
    assert len(bcast.inputs) == 2 and bcast.flops_bwd_data == 2 * bcast.output_elems


def test_primitive_costs_by_hand():
    """scale, bcast and the unary functions cost ReLU's forward; a scale's backward is one pass (read dy, write dx:
    ReLU's forward again), a unary function's ReLU's backward, a broadcast product's both; a random tensor and a
    comparison have no backward; a reduction moves its input and output each pass."""
    cm = kernels_only(load_cost_model(PROFILE))
    shape, small = (64, 28, 28), (64, 28, 1)

    def layer(op, inputs=("x",), out=shape):
        return Layer(name=op, op=op, input_shape=shape, output_shape=out, inputs=inputs)

    ops = ["relu", "scale", "bcast", "tanh", "pow", "random", "compare", "mean"]
    layers = tuple(layer(op, ("x", "y") if op == "bcast" else ("x",), small if op == "mean" else shape)
                   for op in ops)
    coster = LayerCoster(ModelGraph("ops", shape, layers), cm, "fp32")
    t = {op: coster.times(i, Split(8)) for i, op in enumerate(ops)}
    fo, bo = cm.framework_overhead_s("fwd"), cm.framework_overhead_s("bwd")
    params = {"N": 8, "C": 64, "H": 28, "W": 28}
    relu_f = cm.compute_time_s("relu", "fwd", params, "float32")
    relu_b = cm.compute_time_s("relu", "bwd_data", params, "float32")
    for op in ("scale", "bcast", "tanh", "pow", "random", "compare"):
        assert t[op][0] == pytest.approx(relu_f + fo)
    assert t["scale"][1] == pytest.approx(relu_f + bo)
    assert t["tanh"][1] == t["pow"][1] == pytest.approx(relu_b + bo)
    assert t["bcast"][1] == pytest.approx(relu_b + relu_f + bo)
    assert t["random"][1] == t["compare"][1] == 0.0
    moved = 8 * (64 * 28 * 28 + 64 * 28) * 4
    assert t["mean"] == pytest.approx((cm.memory_time_s(moved), cm.memory_time_s(moved)))


def test_tensorflow_bert_has_torch_berts_parameters_and_more_kernels():
    knobs = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512, attention="math")
    torch_bert, _ = build("bert", **knobs)
    tf_bert, _ = build("bert", ops="tf", **knobs)
    assert sum(p.numel() for p in tf_bert.parameters()) == sum(p.numel() for p in torch_bert.parameters())
    plain, tf = load_model("bert", **knobs), load_model("bert", ops="tf", **knobs)
    assert not tf.unsupported
    assert {"gelu", "layernorm", "dropout"} <= {l.op for l in plain.layers}
    assert not {"gelu", "layernorm", "dropout"} & {l.op for l in tf.layers}
    assert sum(l.op == "pow" for l in tf.layers) == 3 + 6  # a GELU per block and the head's; a square per norm
    assert sum(l.op == "random" for l in tf.layers) == sum(l.op == "dropout" for l in plain.layers) == 1 + 3 * 2


def test_masked_positions_run_the_head_on_them_alone():
    knobs = dict(layers=1, hidden=64, heads=4, seq=32, vocab=512)
    graph = load_model("bert", mlm_positions=5, **knobs)
    head = next(l for l in graph.layers if l.op == "linear" and l.tied)
    assert head.input_shape == (5, 64) and graph.layers[-1].input_shape == (5, 512)
    assert load_model("bert", **knobs).layers[-1].input_shape == (32, 512)
    for bad in (-1, 33, 2.5, True):
        with pytest.raises(ValueError, match="mlm_positions"):
            build("bert", mlm_positions=bad, **knobs)
    with pytest.raises(ValueError, match="ops must be one of torch, tf"):
        build("bert", ops="jax", **knobs)


def test_parameters_read_by_primitive_ops_are_counted_once():
    """TensorFlow BERT's layer norm reads gamma and beta as attributes: the first op reading each holds it, so the
    traced step has the module's parameters exactly (tied ones once)."""
    knobs = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512, attention="math")
    for ops in ("torch", "tf"):
        module, _ = build("bert", ops=ops, **knobs)
        graph = load_model("bert", ops=ops, **knobs)
        assert sum(l.params for l in graph.layers) == sum(p.numel() for p in module.parameters())
    tf = load_model("bert", ops="tf", **knobs)
    holders = [l for l in tf.layers if l.params and l.op == "scale"]
    assert len(holders) == 2 * (1 + 2 * 2 + 1) and all(l.params == 64 for l in holders)  # gamma, beta per norm


class HFStyleRMSNorm(nn.Module):
    """HuggingFace's LlamaRMSNorm as its forward writes it (a module the tracer walks into)."""

    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + 1e-6)).to(x.dtype)


def test_a_huggingface_rmsnorm_traces_as_its_kernels_with_its_weight():
    net = nn.Sequential(nn.Linear(16, 16), HFStyleRMSNorm(16))
    graph = trace_module(net, (8, 16))
    assert not graph.unsupported
    ops = [l.op for l in graph.layers if l.op != "flatten"]
    assert ops[:6] == ["linear", "pow", "mean", "scale", "rsqrt", "bcast"] and ops[6] == "scale"
    assert sum(l.params for l in graph.layers) == 16 * 16 + 16 + 16
