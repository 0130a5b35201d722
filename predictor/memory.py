"""Memory per device: what PyTorch keeps alive during one training step.

ParaDL counts 2·δ·Σ[b(|x|+|y|) + |w|] (strategies.md §3) and drops optimizer state, BN/ReLU activations
and the DDP buffers (§4.5 item 7). Here each term is the tensor PyTorch actually holds:

- weights: fp32 parameters (+ a half-precision copy under autocast mixed precision);
- grads: fp32 `.grad` per parameter (autocast keeps parameters and gradients fp32);
- optimizer state: momentum 1, Adam 2 fp32 words per parameter;
- activations kept for backward: each distinct tensor some layer saves for its backward —
  conv/linear/batchnorm/pooling save their input, ReLU its output, max-pool also int64 indices of its
  output, dropout a bool mask; add/concat/flatten save nothing (a flatten is a view of its producer);
- comm buffers: DDP's bucket copy of the gradients (data groups > 1), halo rows, gathered inputs;
- workspace: the activation gradients in flight during backward (dL/dy and dL/dx of the largest layer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from predictor.graph import ModelGraph
from predictor.layercost import MIXED_DTYPES, OPTIMIZER_STATE_WORDS

SAVES_INPUT = ("conv2d", "conv3d", "linear", "batchnorm", "maxpool", "avgpool")


@dataclass(frozen=True)
class SavedTensor:
    """A tensor kept for backward: produced by layer `producer` (-1 = model input), `elems` per sample,
    `bytes_per_elem` None = the activation dtype, `savers` = indices of the layers that keep it."""

    producer: int
    elems: int
    bytes_per_elem: int | None
    savers: tuple[int, ...]


@lru_cache(maxsize=64)
def saved_tensors(graph: ModelGraph) -> tuple[SavedTensor, ...]:
    index = {l.name: i for i, l in enumerate(graph.layers)}

    def resolve(name: str) -> int:
        while name:  # views alias their producer's storage
            i = index[name]
            layer = graph.layers[i]
            if layer.op != "flatten":
                return i
            name = layer.inputs[0] if layer.inputs else ""
        return -1

    savers: dict[int, list[int]] = {}
    extra: list[SavedTensor] = []
    for i, layer in enumerate(graph.layers):
        if layer.op in SAVES_INPUT:
            src = resolve(layer.inputs[0] if layer.inputs else "")
            savers.setdefault(src, []).append(i)
        if layer.op == "relu":
            savers.setdefault(i, []).append(i)
        if layer.op == "maxpool":
            extra.append(SavedTensor(i, layer.output_elems, 8, (i,)))
        if layer.op == "dropout":
            extra.append(SavedTensor(i, layer.output_elems, 1, (i,)))
    out = []
    for src, who in savers.items():
        elems = math.prod(graph.input_shape) if src < 0 else graph.layers[src].output_elems
        out.append(SavedTensor(src, elems, None, tuple(who)))
    return tuple(out + extra)


def parameter_bytes(params: float, dtype: str, optimizer: str) -> tuple[float, float, float]:
    """(weights, grads, optimizer state) bytes for `params` parameters on one device."""
    weights = params * (4 + (2 if dtype in MIXED_DTYPES else 0))
    return weights, params * 4.0, params * 4.0 * OPTIMIZER_STATE_WORDS[optimizer]


def activation_bytes(graph: ModelGraph, samples: float, act_bytes: int, divisor, layers=None) -> float:
    """Bytes of saved tensors for `samples` samples. divisor(tensor) -> how many devices share it;
    `layers` (a set of layer indices) restricts to tensors saved by those layers (a pipeline stage)."""
    total = 0.0
    for t in saved_tensors(graph):
        if layers is not None and not any(s in layers for s in t.savers):
            continue
        total += samples * t.elems * (t.bytes_per_elem or act_bytes) / divisor(t)
    return total


def largest_output_elems(graph: ModelGraph, layers=None) -> int:
    chosen = graph.layers if layers is None else [graph.layers[i] for i in layers]
    return max((l.output_elems for l in chosen), default=0)
