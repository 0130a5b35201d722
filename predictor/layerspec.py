"""A YAML/JSON layer spec for models that are not PyTorch modules. Shapes are inferred layer by layer.

    name: mynet
    input: [3, 32, 32]            # per-sample (C, H, W) or (C, D, H, W)
    layers:
      - {name: conv1, op: conv2d, filters: 16, kernel: 3, stride: 1, padding: 1}
      - {name: fc, op: linear, out: 10}
      - {name: sum, op: add, inputs: [relu1, other]}  # inputs default to the previous layer

ops: conv2d, conv3d (groups, dilation), conv_transpose2d, conv_transpose3d (groups, output_padding), linear,
batchnorm, relu, maxpool, avgpool, add, concat (channels), flatten, dropout; `bias: false` drops a bias. FLOPs as trace.py's.
"""
from __future__ import annotations

import math
from pathlib import Path

from predictor.graph import Layer, ModelGraph
from profiler.errors import UserError
from profiler.inputs import read_structured
from profiler.opmath import conv_flops, dilated_extent, gemm_flops, transposed_output_size, window_output_dims

OPS = ("conv2d", "conv3d", "conv_transpose2d", "conv_transpose3d", "linear", "batchnorm", "relu", "maxpool", "avgpool",
       "add", "concat", "flatten", "dropout")


MAX_DIM = 1 << 24  # largest size of one dimension, channel count or feature count
MAX_ELEMENTS = 1 << 40  # largest per-sample tensor


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value, nd: int, what: str, where: str, minimum: int = 1) -> tuple[int, ...]:
    vals = (value,) * nd if _is_int(value) else tuple(value) if isinstance(value, list) else ()
    if len(vals) != nd or not all(_is_int(v) and minimum <= v <= MAX_DIM for v in vals):
        raise UserError(f"{where}: {what} must be an integer or {nd} integers in {minimum}..{MAX_DIM}, got {value!r}")
    return vals


def _positive(value, what: str, where: str) -> int:
    if not _is_int(value) or not 0 < value <= MAX_DIM:
        raise UserError(f"{where}: {what} must be a positive integer <= {MAX_DIM}, got {value!r}")
    return value


def _window(x, kernel, stride, padding, where: str) -> tuple[int, ...]:
    """Output sizes of a convolution or pooling window; the kernel must fit the padded input."""
    if any(k > s + 2 * p for s, p, k in zip(x[1:], padding, kernel)):
        raise UserError(f"{where}: kernel {kernel} is larger than the padded input {x[1:]} (padding {padding})")
    return window_output_dims(x[1:], kernel, stride, padding)


def load_layer_spec(path: str | Path) -> ModelGraph:
    path = Path(path)
    doc = read_structured(path, "layer spec")
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list) or "input" not in doc:
        raise UserError(f"{path}: a layer spec needs 'input' (per-sample shape) and a 'layers' list")
    if not doc["layers"]:
        raise UserError(f"{path}: 'layers' is empty; a model needs at least one layer")
    if not isinstance(doc["input"], list) or not 1 <= len(doc["input"]) <= 4:
        raise UserError(f"{path}: input must be a per-sample shape of 1 to 4 integers, e.g. [3, 32, 32]")
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
        if name in shapes:
            raise UserError(f"{where}: the name is used by an earlier layer")
        op = item["op"]
        if not isinstance(op, str) or op not in OPS:
            raise UserError(f"{where}: unsupported op {op!r}; supported: {', '.join(OPS)}")
        inputs = item.get("inputs", [previous])
        if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
            raise UserError(f"{where}: inputs must be a non-empty list of earlier layer names")
        inputs = tuple(inputs)
        for i in inputs:
            if i not in shapes:
                raise UserError(f"{where}: input {i!r} is not an earlier layer")
        x = shapes[inputs[0]]
        layers.append(_layer(name, op, x, [shapes[i] for i in inputs], inputs, item, where))
        if math.prod(layers[-1].output_shape) > MAX_ELEMENTS:
            raise UserError(f"{where}: output {layers[-1].output_shape} has more than {MAX_ELEMENTS} elements per sample")
        shapes[name] = layers[-1].output_shape
        previous = name
    return ModelGraph(name=str(doc.get("name", path.stem)), input_shape=input_shape, layers=tuple(layers))


def _convolution(name, op, x, inputs, item, where) -> Layer:
    """A convolution (groups, dilation) or a transposed one (groups, output_padding): as trace.py records
    nn.Conv2d/3d and nn.ConvTranspose2d/3d (Layer.dilation, Layer.transposed; docs/method.md §1)."""
    nd, transposed = len(x) - 1, op.startswith("conv_transpose")
    want = 2 if op.endswith("2d") else 3
    if nd != want:
        raise UserError(f"{where}: {op} needs a {want}-D input, got shape {x}")
    f = _positive(item.get("filters"), "filters", where)
    groups = _positive(item.get("groups", 1), "groups", where)
    if x[0] % groups or f % groups:
        raise UserError(f"{where}: groups {groups} must divide the input channels {x[0]} and the filters {f}")
    kernel = _ints(item.get("kernel", 3), nd, "kernel", where)
    stride = _ints(item.get("stride", 1), nd, "stride", where)
    padding = _ints(item.get("padding", 0), nd, "padding", where, minimum=0)
    dilation = _ints(item.get("dilation", 1), nd, "dilation", where)
    if transposed:
        if set(dilation) != {1}:
            raise UserError(f"{where}: {op} takes no dilation (only 1 is supported), got {item.get('dilation')!r}")
        extra = _ints(item.get("output_padding", 0), nd, "output_padding", where, minimum=0)
        if any(e >= s for e, s in zip(extra, stride)):
            raise UserError(f"{where}: output_padding {extra} must be smaller than the stride {stride}")
        out = tuple(map(transposed_output_size, x[1:], kernel, stride, padding, extra))
        if min(out) < 1 or max(out) > MAX_DIM:
            raise UserError(f"{where}: output {out} of {op} is out of range (kernel {kernel}, padding {padding})")
        weight = (x[0], f // groups, *kernel)
        flop = conv_flops(1, f // groups, x[0], math.prod(kernel), math.prod(x[1:]))  # per sample
    else:
        out = _window(x, dilated_extent(kernel, dilation), stride, padding, where)
        weight = (f, x[0] // groups, *kernel)
        flop = conv_flops(1, x[0] // groups, f, math.prod(kernel), math.prod(out))  # per sample
    params = math.prod(weight) + (f if item.get("bias", True) else 0)
    return Layer(name=name, op="conv2d" if want == 2 else "conv3d", input_shape=x, output_shape=(f, *out),
                 weight_shape=weight, params=params, kernel=kernel, stride=stride, padding=padding, groups=groups,
                 dilation=dilation if set(dilation) != {1} else (), transposed=transposed, flops_fwd=flop,
                 flops_bwd_data=flop, flops_bwd_weight=flop, inputs=inputs)


def _layer(name, op, x, xs, inputs, item, where) -> Layer:
    nd = len(x) - 1
    kernel = stride = padding = ()
    params = 0
    weight: tuple[int, ...] = ()
    if op in ("conv2d", "conv3d", "conv_transpose2d", "conv_transpose3d"):
        return _convolution(name, op, x, inputs, item, where)
    if op == "linear":
        out = _positive(item.get("out"), "out", where)
        y = (out,)
        weight = (out, math.prod(x))
        params = math.prod(weight) + (out if item.get("bias", True) else 0)
        flop = gemm_flops(1, out, math.prod(x))  # per sample
        flops = (flop, flop, flop)
    elif op in ("maxpool", "avgpool"):
        if nd < 1:
            raise UserError(f"{where}: {op} needs a spatial input (C, H, W) or (C, D, H, W), got shape {x}")
        kernel = _ints(item.get("kernel", 2), nd, "kernel", where)
        stride = _ints(item.get("stride", item.get("kernel", 2)), nd, "stride", where)
        padding = _ints(item.get("padding", 0), nd, "padding", where, minimum=0)
        y = (x[0], *_window(x, kernel, stride, padding, where))
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
