"""Channel parallelism: each rank of the model group holds C/p input channels of every conv and linear layer after
the first, computes a partial output over all F channels from them, and the partial outputs are summed with an
autograd-aware all-reduce after which each rank keeps its own C/p channels (comm.all_reduce_keep; backward: an
all-gather of the dL/dy chunks). Batch norm, ReLU and pooling act locally on those channels. The logits are summed
with an all-reduce whose consumer (the loss) is replicated. The first weight layer reads the replicated input and
runs unsplit on every rank, keeping its own output channels, as ParaDL's experiments started channel parallelism
at layer 2; its gradients are partial per rank and summed over the model group. Biases are added after the sum,
on this rank's channels. docs/method.md §12.
"""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from predictor.graph import Layer
from predictor.runner import comm
from predictor.runner.filter import shard_channels, shard_parameter
from predictor.runner.nets import WEIGHT_OPS
from predictor.runner.replica import Replica
from profiler.errors import UserError


class _ChannelSplit(nn.Module):
    """A conv/linear holding C/p input channels: partial output, all-reduce, keep this rank's channels
    (all of them for the last layer), add the bias."""

    def __init__(self, module: nn.Module, group, parts: int, index: int, last: bool):
        super().__init__()
        self.weight = shard_parameter(module.weight, 1, parts, index)
        bias = module.bias
        if bias is not None and not last:
            bias = shard_parameter(bias, 0, parts, index)
        self.bias = bias
        self.module, self.group, self.parts, self.index, self.last = module, group, parts, index, last
        module.weight, module.bias = None, None

    def forward(self, x):
        if isinstance(self.module, nn.Linear):
            partial = F.linear(x, self.weight)
        else:
            partial = self.module._conv_forward(x, self.weight, None)
        if self.last:  # the logits, whole on every rank: the (replicated) loss's gradient needs no exchange
            out = comm.all_reduce_sum(partial, self.group, "identity")
        else:
            out = comm.all_reduce_keep(partial, 1, self.group)
        if self.bias is not None:
            out = out + self.bias.view([1, -1] + [1] * (out.dim() - 2))
        return out


class _KeepChannels(nn.Module):
    """The first (unsplit) layer's output, narrowed to this rank's channels."""

    def __init__(self, module, parts, index):
        super().__init__()
        self.module, self.parts, self.index = module, parts, index

    def forward(self, x):
        return self.module(x).chunk(self.parts, dim=1)[self.index]


class ChannelReplica(Replica):
    def __init__(self, layers: list[Layer], modules: list[nn.Module], model_group, p_model: int, data_group=None, p_data: int = 1):
        super().__init__(modules, data_group, p_data)
        self.model_group, self.p_model = model_group, p_model
        index = comm.dist.get_rank(model_group)
        weight_positions = [i for i, l in enumerate(layers) if l.op in WEIGHT_OPS]
        self.first, last = weight_positions[0], weight_positions[-1]
        self.chain = []
        for i, (layer, module) in enumerate(zip(layers, modules)):
            if layer.op in WEIGHT_OPS and i != last and layer.channels_out % p_model:
                raise UserError(f"channel split over {p_model} ranks: layer {layer.name} has {layer.channels_out} "
                                f"output channels, not divisible by {p_model}")
            if i == self.first:
                module = _KeepChannels(module, p_model, index)
            elif layer.op in WEIGHT_OPS:
                module = _ChannelSplit(module, model_group, p_model, index, last=i == last)
            elif layer.op == "batchnorm":
                shard_channels(module, p_model, index)
            self.chain.append(module)

    def parameters(self):
        return [p for m in self.chain for p in m.parameters()]

    def forward(self, x, y):
        for module in self.chain:
            x = module(x)
        return F.cross_entropy(x, y)

    def sync_grads(self) -> None:
        comm.all_reduce_grads(list(self.chain[self.first].parameters()), self.model_group)
        super().sync_grads()

    def serial_grads(self):
        grads = {}
        for i, module in enumerate(self.chain):
            if isinstance(module, _ChannelSplit):
                grads[f"{i}.weight"] = comm.gather(module.weight.grad.contiguous(), 1, self.model_group, "slice").detach()
                if module.bias is not None:
                    bias = module.bias.grad.contiguous()
                    grads[f"{i}.bias"] = bias if module.last else comm.gather(bias, 0, self.model_group, "slice").detach()
            elif isinstance(module, _KeepChannels):
                grads.update({f"{i}.{n}": p.grad for n, p in module.module.named_parameters()})
            else:
                grads.update({f"{i}.{n}": comm.gather(p.grad.contiguous(), 0, self.model_group, "slice").detach()
                              for n, p in module.named_parameters()})
        return grads
