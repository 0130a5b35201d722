"""Price a ModelGraph as `Block`s at one per-device batch: times from `LayerCoster` (the profile's compute
model at that shape), saved-activation bytes from `predictor.memory.saved_tensors`.

Groups of layers are contiguous index ranges. A group's activation bytes are the tensors whose first
saver is in the group (they live from forward to that group's backward); its input bytes are the outputs
of layers outside the group (or the model input) that layers in the group read: what a checkpoint of the
group, or a pipeline stage boundary, holds.
"""
from __future__ import annotations

import math
from typing import Sequence

from predictor.blocks import Block
from predictor.graph import ModelGraph
from predictor.layercost import ACT_BYTES, LayerCoster, Split
from predictor.memory import saved_tensors

WEIGHT_OPS = ("conv2d", "conv3d", "linear")
#: a block's weight (and gradient) bytes per parameter: fp32 (Block.weight_bytes)
WEIGHT_BYTES_PER_PARAM = 4.0


def per_layer_groups(graph: ModelGraph) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(len(graph.layers))]


def merged_groups(single: Sequence[tuple[int, int]], merge: int) -> list[tuple[int, int]]:
    """`merge` consecutive groups of `single` (weight_layer_groups) as one."""
    return [(single[i][0], single[min(i + merge, len(single)) - 1][1]) for i in range(0, len(single), merge)]


def weight_layer_groups(graph: ModelGraph) -> list[tuple[int, int]]:
    """A new group at every conv/linear layer: each group is one weighted layer and the batchnorm, ReLU,
    pooling and add layers that follow it."""
    starts = [0] + [i for i, l in enumerate(graph.layers) if l.op in WEIGHT_OPS and i > 0]
    return list(zip(starts, starts[1:] + [len(graph.layers)]))


def graph_blocks(graph: ModelGraph, coster: LayerCoster, samples: int,
                 groups: Sequence[tuple[int, int]] | None = None) -> list[Block]:
    """One Block per group at `samples` samples per device (groups default: `weight_layer_groups`)."""
    groups = weight_layer_groups(graph) if groups is None else groups
    act_bytes = ACT_BYTES[coster.dtype]
    group_of = {}
    for g, (start, stop) in enumerate(groups):
        for i in range(start, stop):
            group_of[i] = g
    saved = [0.0] * len(groups)
    for tensor in saved_tensors(graph):
        saved[group_of[min(tensor.savers)]] += samples * tensor.size_bytes(coster.dtype)
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    input_elems = math.prod(graph.input_shape)
    blocks = []
    for g, (start, stop) in enumerate(groups):
        fwd_s = bwd_s = 0.0
        outside = set()
        for i in range(start, stop):
            f, b = coster.times(i, Split(n=samples))
            fwd_s += f
            bwd_s += b
            for name in graph.layers[i].inputs or ("",):
                src = index.get(name, -1) if name else -1
                if not start <= src < stop:
                    outside.add(src)
        in_elems = sum(input_elems if src < 0 else graph.layers[src].output_elems for src in outside)
        params = sum(graph.layers[i].params for i in range(start, stop))
        blocks.append(Block(name=graph.layers[start].name, fwd_s=fwd_s, bwd_s=bwd_s, activation_bytes=saved[g],
                            input_bytes=samples * in_elems * act_bytes,
                            weight_bytes=WEIGHT_BYTES_PER_PARAM * params))
    return blocks


def boundary_bytes_per_sample(graph: ModelGraph, starts: Sequence[int], act_bytes: int) -> list[float]:
    """Bytes per sample crossing into each stage starting at layer index starts[k]: every tensor produced
    before the start (the model input included) and read at or after it. 0 for a stage starting at 0."""
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    last_use: dict[int, int] = {}
    for i, layer in enumerate(graph.layers):
        for name in layer.inputs or ("",):
            src = index.get(name, -1) if name else -1
            last_use[src] = max(last_use.get(src, -1), i)
    input_elems = math.prod(graph.input_shape)
    return [0.0 if start == 0 else
            act_bytes * sum(input_elems if src < 0 else graph.layers[src].output_elems
                            for src, last in last_use.items() if src < start <= last)
            for start in starts]
