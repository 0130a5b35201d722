"""Filter parallelism: each rank of the model group holds F/p filters (output channels / features) of every
conv and linear layer, computes its F/p output channels, and batch norm, ReLU and pooling act on those
channels locally (their parameters split the same way). Before each following weight layer the channel
shards are all-gathered with an autograd-aware gather whose backward reduce-scatters dL/dx, each rank receiving
the sum of its own chunk (docs/method.md §11: forward Allgather of y, backward Reduce-Scatter of dL/dx, where
ParaDL charges an Allreduce and notes a Reduce-Scatter suffices). The logits are
gathered the same way before the (replicated) loss, whose gradient needs no communication.

No gradient exchange inside the model group: each rank updates its own filters. With p_data > 1 (the
data x filter hybrid "df") gradients are averaged over the data group of ranks holding the same shard.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from predictor.graph import Layer
from predictor.runner import comm
from predictor.runner.nets import WEIGHT_OPS
from predictor.runner.replica import Replica
from profiler.errors import UserError


def shard_parameter(param: torch.Tensor, dim: int, parts: int, index: int) -> nn.Parameter:
    return nn.Parameter(param.detach().chunk(parts, dim=dim)[index].clone())


def shard_channels(module: nn.Module, parts: int, index: int) -> None:
    """Keep this rank's output channels of a conv/linear/batch norm (weights, bias, running stats)."""
    for name in ("weight", "bias"):
        param = getattr(module, name, None)
        if param is not None:
            setattr(module, name, shard_parameter(param, 0, parts, index))
    for name in ("running_mean", "running_var"):
        buffer = getattr(module, name, None)
        if buffer is not None:
            setattr(module, name, buffer.chunk(parts)[index].clone())
    for attr in ("out_channels", "out_features", "num_features"):
        if hasattr(module, attr):
            setattr(module, attr, getattr(module, attr) // parts)


class FilterReplica(Replica):
    def __init__(self, layers: list[Layer], modules: list[nn.Module], model_group, p_model: int, data_group=None, p_data: int = 1):
        super().__init__(modules, data_group, p_data)
        self.model_group, self.p_model = model_group, p_model
        index = comm.dist.get_rank(model_group)
        self.gather_before = []
        seen_weight_layer = False
        for layer, module in zip(layers, modules):
            if layer.op in WEIGHT_OPS or layer.op == "batchnorm":
                if layer.channels_out % p_model:
                    raise UserError(f"filter split over {p_model} ranks: layer {layer.name} has {layer.channels_out} "
                                    f"output channels, not divisible by {p_model}")
                shard_channels(module, p_model, index)
            self.gather_before.append(layer.op in WEIGHT_OPS and seen_weight_layer)
            seen_weight_layer = seen_weight_layer or layer.op in WEIGHT_OPS
        self.shards = {f"{i}.{n}" for i, m in enumerate(modules) for n, _ in m.named_parameters()}

    def forward(self, x, y):
        for gather_first, module in zip(self.gather_before, self.modules):
            if gather_first:
                x = comm.gather(x, 1, self.model_group, "sum")
            x = module(x)
        return F.cross_entropy(comm.gather(x, 1, self.model_group, "slice"), y)

    def serial_grads(self):
        return {name: comm.gather(g.contiguous(), 0, self.model_group, "slice").detach()
                for name, g in super().serial_grads().items()}
