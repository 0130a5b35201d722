"""Ops costed through another op's profile fit: SiLU and sigmoid as ReLU, mul as add."""

import pytest

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.graph import Layer, ModelGraph
from predictor.layercost import LayerCoster, Split

PROFILE = shipped_profile("a100-dgx-8gpu.published")
SHAPE = (64, 28, 28)


def _elementwise(op: str, inputs=("x",)) -> Layer:
    return Layer(name=op, op=op, input_shape=SHAPE, output_shape=SHAPE, inputs=inputs)


def test_activations_cost_as_relu_and_mul_as_add():
    cm = load_cost_model(PROFILE)
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

