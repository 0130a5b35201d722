"""Tensor parallelism as Megatron-LM runs it (Shoeybi et al. 2019 §3; predictor.strategies.tensor costs it).

The column/row pairs are the predictor's own (strategies.tensor.tensor_split on the same graph). A
column-parallel linear keeps this rank's F/p output features (weight rows and bias) and reads its input through
`comm.copy_to_group` (Megatron's "f": identity forward, all-reduce of dL/dx backward); the element-wise layers
after it act on the split features unchanged; the row-parallel linear keeps the matching K/p input features of
its weight, and its partial output is summed with `comm.all_reduce_sum(..., "identity")` ("g": all-reduce
forward, identity backward, every rank's consumer being replicated) before the whole bias is added. Every other
layer is replicated and sees the same tensors and gradients on every rank, so no gradient exchange is needed
inside the tensor group; with p_data > 1 (data+tensor) gradients are averaged over the ranks holding the same
shard. Sequence parallelism is costed by the predictor, not run here.
"""
from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn
from torch.nn import functional as F

from predictor.graph import Layer, ModelGraph
from predictor.runner import comm
from predictor.runner.filter import shard_parameter
from predictor.runner.replica import Replica
from predictor.strategies.tensor import split_width, tensor_split
from profiler.errors import UserError


def with_inputs(graph: ModelGraph) -> ModelGraph:
    """The chain with every layer's input named (the runner reads a missing list as the previous layer, the
    predictor as the model input)."""
    previous, layers = "", []
    for layer in graph.layers:
        layers.append(layer if layer.inputs else replace(layer, inputs=(previous,)))
        previous = layer.name
    return replace(graph, layers=tuple(layers))


class ColumnParallelLinear(nn.Module):
    """This rank's output features of a linear layer; its output stays split."""

    def __init__(self, linear: nn.Linear, group, parts: int, index: int):
        super().__init__()
        self.weight = shard_parameter(linear.weight, 0, parts, index)
        self.bias = shard_parameter(linear.bias, 0, parts, index) if linear.bias is not None else None
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(comm.copy_to_group(x, self.group), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """This rank's input features of a linear layer: a partial output, summed over the group, plus the bias."""

    def __init__(self, linear: nn.Linear, group, parts: int, index: int):
        super().__init__()
        self.weight = shard_parameter(linear.weight, 1, parts, index)
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = comm.all_reduce_sum(F.linear(x, self.weight), self.group, "identity")
        return out + self.bias if self.bias is not None else out


class TensorReplica(Replica):
    def __init__(self, graph: ModelGraph, layers: list[Layer], modules: list[nn.Module], model_group, p_model: int,
                 data_group=None, p_data: int = 1):
        ts = tensor_split(with_inputs(graph))
        if not ts.columns:
            raise UserError(f"tensor split over {p_model} ranks: model {graph.name} has no linear -> element-wise -> "
                            "linear pair to split")
        for i in ts.columns + ts.inside + ts.rows:
            layer = graph.layers[i]
            width = split_width(layer, i in ts.rows)
            if width % p_model:
                raise UserError(f"tensor split over {p_model} ranks: layer {layer.name} has {width} features, "
                                f"not divisible by {p_model}")
        columns = {graph.layers[i].name for i in ts.columns}
        rows = {graph.layers[i].name for i in ts.rows}
        index = comm.dist.get_rank(model_group)
        self.model_group = model_group
        self.kinds = []
        chain = []
        for layer, module in zip(layers, modules):
            if layer.name in columns:
                module, kind = ColumnParallelLinear(module, model_group, p_model, index), "column"
            elif layer.name in rows:
                module, kind = RowParallelLinear(module, model_group, p_model, index), "row"
            else:
                kind = "replicated"
            chain.append(module)
            self.kinds.append(kind)
        super().__init__(chain, data_group, p_data)

    def serial_grads(self):
        grads = {}
        for i, (module, kind) in enumerate(zip(self.modules, self.kinds)):
            for name, param in module.named_parameters():
                grad = param.grad.contiguous()
                if kind == "column" or (kind == "row" and name == "weight"):
                    grad = comm.gather(grad, 0 if kind == "column" else 1, self.model_group, "slice").detach()
                grads[f"{i}.{name}"] = grad
        return grads
