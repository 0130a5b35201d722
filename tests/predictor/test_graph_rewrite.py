"""TensorFlow's automatic mixed precision painted over a layer graph (predictor.graph_rewrite) and costed: float32
islands after denied ops, casts on the edges between precisions, the weights cast every step."""

import pytest

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.api import load_model
from predictor.graph import Layer, ModelGraph
from predictor.graph_rewrite import cast_elems, half_layers
from predictor.layercost import LayerCoster, Split
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

PROFILE = shipped_profile("v100-dgx1-1edr-8gpu.published")
SHAPE = (16, 64)


def _graph(*spec) -> ModelGraph:
    """Layers (name, op, inputs) of one shape; linear layers with a 64 x 64 weight."""
    layers = tuple(Layer(name=n, op=op, input_shape=SHAPE, output_shape=SHAPE, inputs=tuple(ins),
                         params=64 * 64 if op == "linear" else 0) for n, op, ins in spec)
    return ModelGraph("g", SHAPE, layers)


def test_painting_by_hand():
    """fc1 -> add (bias-like) -> view -> fc2: the add and the view lie between two allowed products, so half.
    fc2 -> pow (denied) -> scale -> tanh -> mul(fc2, tanh) -> fc3: the deny spreads through the inferring ops
    after it, so the GELU-like chain is float32, and fc2's output is cast for it; relu after fc3 (clear) follows
    fc3 into half; the loss is denied."""
    g = _graph(("fc1", "linear", [""]), ("b", "add", ["fc1", "fc1"]), ("v", "flatten", ["b"]),
               ("fc2", "linear", ["v"]), ("p", "pow", ["fc2"]), ("s", "scale", ["p"]), ("t", "tanh", ["s"]),
               ("m", "mul", ["fc2", "t"]), ("fc3", "linear", ["m"]), ("r", "relu", ["fc3"]),
               ("loss", "cross_entropy", ["r"]))
    half = dict(zip((l.name for l in g.layers), half_layers(g)))
    assert half == {"fc1": True, "b": True, "v": True, "fc2": True, "p": False, "s": False, "t": False,
                    "m": False, "fc3": True, "r": True, "loss": False}
    casts = dict(zip((l.name for l in g.layers), cast_elems(g, half_layers(g))))
    elems = 16 * 64
    # fc2 feeds two float32 ops: one cast shared; m (float32) feeds fc3 (half); r (half) feeds the loss
    assert casts == {"fc1": 0, "b": 0, "v": 0, "fc2": elems, "p": 0, "s": 0, "t": 0, "m": elems, "fc3": 0,
                     "r": elems, "loss": 0}


def test_an_inferring_op_not_between_products_stays_float32():
    """A bias add after a product that leads only into a denied op is not between two allowed ops."""
    g = _graph(("fc", "linear", [""]), ("b", "add", ["fc", "fc"]), ("mean", "mean", ["b"]))
    assert half_layers(g) == (True, False, False)


def test_casts_and_weights_costed_by_hand():
    g = _graph(("fc1", "linear", [""]), ("p", "pow", ["fc1"]), ("fc2", "linear", ["p"]))
    cm = kernels_only(load_cost_model(PROFILE))
    half = half_layers(g)
    assert half == (True, False, True)
    plain = LayerCoster(g, cm, "fp16")
    painted = LayerCoster(g, cm, "fp16", half=half)
    split = Split(8)
    cast = cm.memory_time_s(6 * 8 * 16 * 64)  # read 2 + write 4 bytes per element (and the gradient back)
    weights = cm.memory_time_s(6 * 64 * 64)  # the float32 weight to half, and its gradient back
    f0, b0 = plain.times(0, split)
    f1, b1 = painted.times(0, split)
    assert f1 == pytest.approx(f0 + cm.memory_time_s(6 * 8 * 16 * 64 + 6 * 64 * 64))
    assert b1 == pytest.approx(b0 + cm.memory_time_s(6 * 8 * 16 * 64 + 6 * 64 * 64))
    assert cast > 0 and weights > 0
    # the pow runs in float32: its relu-family time at float32 against float16
    params = {"N": 8, "C": 16, "H": 64, "W": 1}
    assert painted.times(1, split)[0] - cm.framework_overhead_s("fwd") == pytest.approx(
        cm.compute_time_s("relu", "fwd", params, "float32") + cm.memory_time_s(6 * 8 * 16 * 64))
    assert plain.times(1, split)[0] - cm.framework_overhead_s("fwd") == pytest.approx(
        cm.compute_time_s("relu", "fwd", params, "float16"))


def test_tensorflow_bert_keeps_its_residual_stream_in_float32():
    g = load_model("bert", layers=1, hidden=64, heads=4, seq=32, vocab=512, attention="math", ops="tf")
    half = dict(zip((l.name for l in g.layers), half_layers(g)))
    ops = {l.name: l.op for l in g.layers}
    assert all(half[n] for n, op in ops.items() if op in ("linear", "bmm"))
    assert not any(half[n] for n, op in ops.items() if op in ("pow", "tanh", "mean", "rsqrt", "cross_entropy"))
    scores = [n for n, op in ops.items() if op == "softmax"]
    assert scores and all(half[n] for n in scores)  # Softmax infers: between the two attention products


def test_a_plan_under_the_graph_rewrite_costs_its_float32_islands_in_time_and_memory():
    """--mixed-precision graph-rewrite against autocast on TensorFlow's BERT: slower (float32 norms and GELU, casts)
    and more activation memory (their saved tensors at 4 bytes); fp32 plans are not painted."""
    from predictor.api import predict
    from predictor.plan import Plan

    g = load_model("bert", layers=2, hidden=64, heads=4, seq=32, vocab=512, attention="math", ops="tf")
    cm = kernels_only(load_cost_model(PROFILE))
    run = lambda dtype, mp: predict(g, Plan(strategy="serial", batch=8, devices=1, devices_per_node=8, dtype=dtype,
                                            mixed_precision=mp), cm)
    auto, rewrite = run("fp16", "autocast"), run("fp16", "graph-rewrite")
    assert rewrite.feasible and rewrite.iteration_s > auto.iteration_s
    assert rewrite.activations_bytes > auto.activations_bytes
    assert run("fp32", "graph-rewrite").iteration_s == run("fp32", "autocast").iteration_s
