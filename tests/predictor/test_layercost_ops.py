"""Ops costed through another op's profile fit: SiLU and sigmoid as ReLU, mul as add."""

import pytest

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.graph import Layer, ModelGraph
from predictor.layercost import LayerCoster, Split, _pass_params
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

PROFILE = shipped_profile("a100-dgx-8gpu.published")
SHAPE = (64, 28, 28)


def _elementwise(op: str, inputs=("x",)) -> Layer:
    return Layer(name=op, op=op, input_shape=SHAPE, output_shape=SHAPE, inputs=inputs)


def test_activations_cost_as_relu_and_mul_as_add():
    cm = kernels_only(load_cost_model(PROFILE))
    ops = ["relu", "silu", "sigmoid", "add", "mul"]
    layers = tuple(_elementwise(op, ("x", "y") if op in ("add", "mul") else ("x",)) for op in ops)
    coster = LayerCoster(ModelGraph("ops", SHAPE, layers), cm, "fp32")
    times = {op: coster.times(i, Split(8)) for i, op in enumerate(ops)}
    assert times["silu"] == times["relu"] and times["sigmoid"] == times["relu"]
    # mul: forward as add; backward (a gradient per input) as one more add-like pass, where add's needs no kernel
    add_kernel = cm.compute_time_s("add", "fwd", {"N": 8, "C": 64, "H": 28, "W": 28}, "float32")
    assert times["mul"][0] == times["add"][0] == pytest.approx(add_kernel + cm.framework_overhead_s("fwd"))
    assert times["mul"][1] == pytest.approx(add_kernel + cm.framework_overhead_s("bwd"))
    assert times["add"][1] == pytest.approx(cm.framework_overhead_s("bwd"))



def test_no_input_gradient_upstream_of_the_first_parameters(monkeypatch):
    """Autograd computes an input gradient only for a tensor with parameters upstream: a flatten or pooling on
    the model input and the first linear layer after it run no input-gradient pass (torch.profiler on
    Flatten -> Linear -> ReLU -> Linear: three mm in backward, the first linear's dW only); a residual add that
    reads the model input and a convolution's output needs one (its other input requires a gradient)."""
    from predictor.layercost import input_needs_no_grad

    def layer(name, op, inputs, params=0):
        return Layer(name=name, op=op, input_shape=SHAPE, output_shape=SHAPE, inputs=inputs, params=params)

    graph = ModelGraph("mlp", SHAPE, (layer("flat", "flatten", ("",)), layer("pool", "maxpool", ("flat",)),
                                      layer("fc1", "linear", ("pool",), 10), layer("act", "relu", ("fc1",)),
                                      layer("fc2", "linear", ("act",), 10), layer("conv", "conv2d", ("",), 10),
                                      layer("sum", "add", ("", "conv"))))
    assert input_needs_no_grad(graph) == [True, True, True, False, False, True, False]
    cm, split, overhead = kernels_only(load_cost_model(PROFILE)), Split(8), 7e-6
    monkeypatch.setattr(cm, "framework_overhead_s", lambda pass_: overhead)  # an autograd node shows as 7 µs
    bwd = [LayerCoster(graph, cm, "fp32").times(i, split)[1] for i in range(len(graph.layers))]

    def call(i, pass_):
        op, params = _pass_params(graph.layers[i], split)
        return cm.compute_time_s(op, pass_, params, "float32")

    assert bwd[0] == bwd[1] == 0.0  # flatten and pooling on the input: no autograd node, no kernel
    assert call(2, "bwd_data") > 0
    assert bwd[2] == pytest.approx(call(2, "bwd_weight") + overhead)  # fc1: its weight gradient only
    assert bwd[4] == pytest.approx(call(4, "bwd_data") + call(4, "bwd_weight") + overhead)  # fc2: both passes
    assert bwd[5] == pytest.approx(call(5, "bwd_weight") + overhead)  # the conv on the input: dW only
    assert bwd[6] == pytest.approx(call(6, "bwd_data") + overhead)  # the add reads the conv's output: a node


def test_a_tied_head_costs_its_weight_gradient():
    """A language-model head tied to its embedding owns no weight (params 0) but autograd still computes
    dW = dYᵀ X for it, summed into the embedding's gradient: its backward is the untied head's."""
    vocab, hidden = 1000, 64
    head = dict(name="head", op="linear", input_shape=(16, hidden), output_shape=(16, vocab),
                weight_shape=(vocab, hidden), inputs=("x",))
    tied, own = Layer(**head, params=0), Layer(**head, params=vocab * hidden)
    assert tied.tied and not own.tied and not Layer(name="r", op="relu", input_shape=SHAPE, output_shape=SHAPE).tied
    cm = kernels_only(load_cost_model(PROFILE))
    times = [LayerCoster(ModelGraph("lm", (16, hidden), (layer,)), cm, "fp32").times(0, Split(4))
             for layer in (tied, own)]
    assert times[0] == times[1]


def test_an_optimizer_written_in_ops_costs_its_words_and_launches_by_hand():
    """adamw-ops (BERT's TensorFlow AdamWeightDecayOptimizer): 39 float32 words per parameter in any precision, and
    17 kernels per variable each at least the profile's shortest memory-bound kernel; a streaming Adam 7 words, no
    launches."""
    from predictor.layercost import PER_OP_UPDATES, update_bytes, update_launch_s

    cm = kernels_only(load_cost_model(PROFILE))
    assert PER_OP_UPDATES["adamw-ops"] == (39, 17)
    assert update_bytes(1e6, "adamw-ops", "fp16") == update_bytes(1e6, "adamw-ops", "fp32") == 39 * 4e6
    assert update_bytes(1e6, "adam", "fp32") == 7 * 4e6
    shortest = cm.compute_time_s("relu", "fwd", {"N": 1, "C": 1, "H": 1, "W": 1}, "float32")
    assert shortest > 0 and update_launch_s(cm, "adamw-ops", 200) == pytest.approx(17 * 200 * shortest)
    assert update_launch_s(cm, "adam", 200) == 0.0 and update_launch_s(cm, "adamw-ops", 0) == 0.0


def test_a_rectangular_kernel_is_a_convolution_of_the_family():
    """Inception's 1x7 (padding 0x3) over 17x17 maps: a conv2d call with per-dimension kernel, stride and padding, its
    FLOPs 2 x n x 17 x 17 x F x C x 7, costed by the convolution family (and its fitted scale), not as a GEMM;
    a grouped rectangular kernel stays the GEMM it lowers to."""
    layer = Layer(name="c", op="conv2d", input_shape=(128, 17, 17), output_shape=(192, 17, 17), inputs=("x",),
                  params=128 * 192 * 7, kernel=(1, 7), stride=(1, 1), padding=(0, 3))
    op, params = _pass_params(layer, Split(32))
    assert op == "conv2d" and params == {"N": 32, "C": 128, "F": 192, "kernel": (1, 7), "stride": (1, 1),
                                         "padding": (0, 3), "H": 17, "W": 17}
    from calibrate import shapes
    assert shapes.work("conv2d", "fwd", params, "float32")["flops"] == 2 * 32 * 17 * 17 * 192 * 128 * 7
    cm = kernels_only(load_cost_model(PROFILE))
    fit = cm.coefficients.compute["conv2d/fwd/float16"]
    gemm = cm.coefficients.compute["gemm/fwd/float16"]
    assert fit.time_scale.value != gemm.time_scale.value  # the convolution family carries the fitted scale
    grouped = Layer(name="g", op="conv2d", input_shape=(128, 17, 17), output_shape=(128, 17, 17), inputs=("x",),
                    params=128 * 2 * 7, kernel=(1, 7), stride=(1, 1), padding=(0, 3), groups=64)
    assert _pass_params(grouped, Split(32)) == ("gemm", {"M": 32 * 17 * 17, "N": 128, "K": 2 * 7})
