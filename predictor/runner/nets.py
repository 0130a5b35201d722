"""Torch layers for a sequential ModelGraph, so the runner trains exactly the net the predictor costs.

The runner distributes chains of conv/batchnorm/relu/pool/flatten/linear layers (2-D and 3-D). Every rank
builds the same serial net from the same seed; the strategy modules then cut their shards out of it, so
the serial and distributed runs start from identical weights (the equivalence tests rely on this).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from predictor.graph import Layer, ModelGraph
from profiler.errors import UserError

RUNNABLE_OPS = ("conv2d", "conv3d", "batchnorm", "relu", "maxpool", "avgpool", "flatten", "linear", "dropout", "softmax_loss")
WEIGHT_OPS = ("conv2d", "conv3d", "linear")


def check_sequential(graph: ModelGraph) -> None:
    """UserError unless every layer is runnable and feeds only from the previous one."""
    previous = ""
    for layer in graph.layers:
        if layer.op not in RUNNABLE_OPS:
            raise UserError(f"model {graph.name}: layer {layer.name} ({layer.op}) is not supported by the validation runner "
                            f"(supported: {', '.join(RUNNABLE_OPS)})")
        if layer.inputs and tuple(layer.inputs) != (previous,):
            raise UserError(f"model {graph.name}: layer {layer.name} is not a plain chain (inputs {layer.inputs}); "
                            "the validation runner runs sequential nets only")
        previous = layer.name


def _has_bias(layer: Layer) -> bool:
    return layer.params > math.prod(layer.weight_shape)


def build_layer(layer: Layer) -> nn.Module | None:
    """The torch module of one graph layer (None for layers with no computation in training: dropout at
    p=0 for determinism, and the loss, which the runner applies itself)."""
    spatial_dims = len(layer.input_shape) - 1
    if layer.op in ("conv2d", "conv3d"):
        conv = nn.Conv2d if layer.op == "conv2d" else nn.Conv3d
        return conv(layer.channels_in, layer.channels_out, layer.kernel, layer.stride, layer.padding,
                    groups=layer.groups, bias=_has_bias(layer))
    if layer.op == "batchnorm":
        return (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)[max(spatial_dims, 1) - 1](layer.channels_in)
    if layer.op == "relu":
        return nn.ReLU()
    if layer.op in ("maxpool", "avgpool"):
        table = {("maxpool", 2): nn.MaxPool2d, ("maxpool", 3): nn.MaxPool3d, ("avgpool", 2): nn.AvgPool2d, ("avgpool", 3): nn.AvgPool3d}
        return table[(layer.op, spatial_dims)](layer.kernel, layer.stride, layer.padding or 0)
    if layer.op == "flatten":
        return nn.Flatten()
    if layer.op == "linear":
        return nn.Linear(layer.input_shape[-1], layer.output_shape[-1], bias=_has_bias(layer))
    return None


def build_serial(graph: ModelGraph, seed: int = 0) -> tuple[list[Layer], list[nn.Module]]:
    """The graph's layers that compute, and their torch modules, initialised from `seed`."""
    check_sequential(graph)
    torch.manual_seed(seed)
    layers, modules = [], []
    for layer in graph.layers:
        module = build_layer(layer)
        if module is not None:
            layers.append(layer)
            modules.append(module)
    return layers, modules


def num_classes(graph: ModelGraph) -> int:
    last = [l for l in graph.layers if l.op != "softmax_loss"][-1]
    if len(last.output_shape) != 1:
        raise UserError(f"model {graph.name}: the last layer {last.name} must be linear (classes), got shape {last.output_shape}")
    return last.output_shape[0]


def synthetic_batch(graph: ModelGraph, batch: int, seed: int, dtype=torch.float32, device="cpu"):
    """Random inputs and labels of the global batch; every rank draws the same ones from `seed`."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((batch, *graph.input_shape), generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    y = torch.randint(0, num_classes(graph), (batch,), generator=gen).to(device)
    return x, y
