"""Tiny sequential ModelGraphs for the runner tests (shapes only; the runner needs no FLOPs)."""
from __future__ import annotations

import math

from predictor.graph import Layer, ModelGraph


def chain(name: str, input_shape: tuple[int, ...], spec: list[tuple]) -> ModelGraph:
    """spec items: ("conv", F, k, s, p), ("bn",), ("relu",), ("maxpool", k), ("flatten",), ("linear", out)."""
    shape, layers = tuple(input_shape), []
    dims = len(input_shape) - 1
    for i, item in enumerate(spec):
        kind, args = item[0], item[1:]
        lname = f"{kind}{i}"
        if kind == "conv":
            f, k, s, p = args
            out = (f, *[(x + 2 * p - k) // s + 1 for x in shape[1:]])
            w = (f, shape[0], *[k] * dims)
            layers.append(Layer(lname, f"conv{dims}d", shape, out, w, math.prod(w) + f, (k,) * dims, (s,) * dims, (p,) * dims))
        elif kind == "bn":
            out = shape
            layers.append(Layer(lname, "batchnorm", shape, out, (shape[0],), 2 * shape[0]))
        elif kind == "relu":
            out = shape
            layers.append(Layer(lname, "relu", shape, out))
        elif kind == "maxpool":
            (k,) = args
            out = (shape[0], *[x // k for x in shape[1:]])
            layers.append(Layer(lname, "maxpool", shape, out, kernel=(k,) * dims, stride=(k,) * dims, padding=(0,) * dims))
        elif kind == "flatten":
            out = (math.prod(shape),)
            layers.append(Layer(lname, "flatten", shape, out))
        elif kind == "linear":
            (f,) = args
            out = (f,)
            layers.append(Layer(lname, "linear", shape, out, (f, shape[0]), f * shape[0] + f))
        shape = out
    return ModelGraph(name, tuple(input_shape), tuple(layers))


def net2d(bn: bool = True) -> ModelGraph:
    norm = [("bn",)] if bn else []
    return chain("tiny2d", (3, 8, 8), [("conv", 4, 3, 1, 1), *norm, ("relu",), ("maxpool", 2),
                                       ("conv", 8, 3, 1, 1), *norm, ("relu",), ("flatten",), ("linear", 6), ("relu",), ("linear", 4)])


def net3d() -> ModelGraph:
    return chain("tiny3d", (2, 8, 4, 4), [("conv", 4, 3, 1, 1), ("bn",), ("relu",), ("maxpool", 2),
                                          ("conv", 4, 3, 1, 1), ("relu",), ("flatten",), ("linear", 4)])


def net2d_strided() -> ModelGraph:
    """Stride-2 and 1x1 convolutions (halo only before the slab for the stride-2 conv)."""
    return chain("strided2d", (3, 8, 8), [("conv", 4, 3, 1, 1), ("relu",), ("conv", 8, 3, 2, 1), ("bn",), ("relu",),
                                          ("conv", 8, 1, 1, 0), ("flatten",), ("linear", 4)])


def mlp() -> ModelGraph:
    """Two column/row-parallel pairs (8 -> 16 -> 12 and 12 -> 16 -> 8) and a replicated head (8 -> 4)."""
    return chain("mlp", (8,), [("linear", 16), ("relu",), ("linear", 12), ("relu",), ("linear", 16), ("relu",),
                               ("linear", 8), ("linear", 4)])
