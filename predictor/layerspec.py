"""A YAML/JSON layer spec for models that are not PyTorch modules. Shapes are inferred layer by layer.

    name: mynet
    input: [3, 32, 32]            # per-sample (C, H, W) or (C, D, H, W)
    layers:
      - {name: conv1, op: conv2d, filters: 16, kernel: 3, stride: 1, padding: 1}
      - {name: bn1, op: batchnorm}
      - {name: relu1, op: relu}
      - {name: pool1, op: maxpool, kernel: 2}       # stride defaults to kernel
      - {name: flat, op: flatten}
      - {name: fc, op: linear, out: 10}
      - {name: sum, op: add, inputs: [relu1, other]}  # inputs default to the previous layer

ops: conv2d, conv3d, linear, batchnorm, relu, maxpool, avgpool, add, concat (channels), flatten,
dropout. `bias: false` drops conv/linear bias. FLOPs follow trace.py's formulas.
"""
from __future__ import annotations

import math
from pathlib import Path

from predictor.graph import Layer, ModelGraph
from profiler.errors import UserError
from profiler.inputs import read_structured

OPS = ("conv2d", "conv3d", "linear", "batchnorm", "relu", "maxpool", "avgpool", "add", "concat", "flatten", "dropout")


def _ints(value, nd: int, what: str, where: str) -> tuple[int, ...]:
    vals = (value,) * nd if isinstance(value, int) else tuple(value)
    if len(vals) != nd or not all(isinstance(v, int) for v in vals):
        raise UserError(f"{where}: {what} must be an integer or {nd} integers, got {value!r}")
    return vals


def _positive(value, what: str, where: str) -> int:
    if not isinstance(value, int) or value <= 0:
        raise UserError(f"{where}: {what} must be a positive integer, got {value!r}")
    return value


def load_layer_spec(path: str | Path) -> ModelGraph:
    path = Path(path)
    doc = read_structured(path, "layer spec")
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list) or "input" not in doc:
        raise UserError(f"{path}: a layer spec needs 'input' (per-sample shape) and a 'layers' list")
    input_shape = tuple(_positive(d, "input dimension", f"{path}: input") for d in doc["input"])
    shapes: dict[str, tuple[int, ...]] = {"": input_shape}
    layers: list[Layer] = []
    previous = ""
    for k, item in enumerate(doc["layers"]):
        where = f"{path}: layers[{k}]"
        if not isinstance(item, dict) or "op" not in item:
            raise UserError(f"{where}: each layer needs an 'op'")
        name = str(item.get("name", f"layer{k}"))
        where = f"{path}: layer {name}"
        op = item["op"]
        if op not in OPS:
            raise UserError(f"{where}: unsupported op {op!r}; supported: {', '.join(OPS)}")
        inputs = tuple(item.get("inputs", [previous]))
        for i in inputs:
            if i not in shapes:
                raise UserError(f"{where}: input {i!r} is not an earlier layer")
        x = shapes[inputs[0]]
        layers.append(_layer(name, op, x, [shapes[i] for i in inputs], inputs, item, where))
        shapes[name] = layers[-1].output_shape
        previous = name
    return ModelGraph(name=str(doc.get("name", path.stem)), input_shape=input_shape, layers=tuple(layers))


def _layer(name, op, x, xs, inputs, item, where) -> Layer:
    nd = len(x) - 1
    kernel = stride = padding = ()
    params = 0
    weight: tuple[int, ...] = ()
    if op in ("conv2d", "conv3d"):
        want = 2 if op == "conv2d" else 3
        if nd != want:
            raise UserError(f"{where}: {op} needs a {want}-D input, got shape {x}")
        f = _positive(item.get("filters"), "filters", where)
        kernel = _ints(item.get("kernel", 3), nd, "kernel", where)
        stride = _ints(item.get("stride", 1), nd, "stride", where)
        padding = _ints(item.get("padding", 0), nd, "padding", where)
        out = tuple((s + 2 * p - k) // st + 1 for s, p, k, st in zip(x[1:], padding, kernel, stride))
        if any(o <= 0 for o in out):
            raise UserError(f"{where}: output size {out} is not positive")
        y = (f, *out)
        weight = (f, x[0], *kernel)
        params = math.prod(weight) + (f if item.get("bias", True) else 0)
        flop = 2.0 * x[0] * math.prod(kernel) * math.prod(y)
        flops = (flop, flop, flop)
    elif op == "linear":
        out = _positive(item.get("out"), "out", where)
        y = (out,)
        weight = (out, math.prod(x))
        params = math.prod(weight) + (out if item.get("bias", True) else 0)
        flop = 2.0 * math.prod(x) * out
        flops = (flop, flop, flop)
    elif op in ("maxpool", "avgpool"):
        kernel = _ints(item.get("kernel", 2), nd, "kernel", where)
        stride = _ints(item.get("stride", item.get("kernel", 2)), nd, "stride", where)
        padding = _ints(item.get("padding", 0), nd, "padding", where)
        y = (x[0], *((s + 2 * p - k) // st + 1 for s, p, k, st in zip(x[1:], padding, kernel, stride)))
        flops = (math.prod(kernel) * math.prod(y), float(math.prod(y)), 0.0)
    elif op == "concat":
        if any(s[1:] != x[1:] for s in xs):
            raise UserError(f"{where}: concat inputs differ outside the channel dim: {xs}")
        y = (sum(s[0] for s in xs), *x[1:])
        flops = (0.0, 0.0, 0.0)
    elif op == "add":
        if any(s != x for s in xs):
            raise UserError(f"{where}: add inputs have different shapes: {xs}")
        y = x
        flops = (float(math.prod(y) * (len(xs) - 1)), 0.0, 0.0)
    elif op == "flatten":
        y = (math.prod(x),)
        flops = (0.0, 0.0, 0.0)
    else:  # batchnorm, relu, dropout
        y = x
        if op == "batchnorm":
            params = 2 * x[0]
            weight = (x[0],)
            flops = (4.0 * math.prod(y), 4.0 * math.prod(y), 2.0 * math.prod(y))
        else:
            flops = (float(math.prod(y)), float(math.prod(y)), 0.0)
    return Layer(name=name, op=op, input_shape=x, output_shape=y, weight_shape=weight, params=params,
                 kernel=kernel, stride=stride, padding=padding, flops_fwd=flops[0], flops_bwd_data=flops[1],
                 flops_bwd_weight=flops[2], inputs=inputs)
