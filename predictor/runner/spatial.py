"""Spatial parallelism: the input is split along its first spatial dimension (H for 2-D nets, D for 3-D)
over the model group; each conv/pool exchanges halos with its neighbours by point-to-point inside an
autograd function, so forward (halo of x) and backward (halo of dL/dy) are both distributed
(ParaDL tech report eq. 10; docs/method.md §10). Convs run with padding 0 along the split dimension on the
halo-extended local slab; the chain's ends receive zero halos (the serial net's zero padding).

Batch norm is synchronised over the spatial group (sum and sum of squares all-reduced), so statistics are
those of the whole sample, as in the serial net. At the first flatten/linear the split activation is
all-gathered (backward: this rank's slice) and the rest of the net runs replicated. Weights are replicated:
gradients of split layers are summed over the spatial group, then everything is averaged over the data
group (data x spatial hybrid when p_data > 1).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from predictor.graph import Layer
from predictor.runner import comm
from predictor.runner.replica import Replica
from profiler.errors import UserError
from profiler.opmath import window_output_size

SPLIT_DIM = 2  # tensor dimension: N, C, then the first spatial dimension


def halo_rows(layer: Layer) -> tuple[int, int]:
    """Rows needed from the previous and next rank along the split dim: padding before, and the kernel's
    reach past the local slab after (kernel - stride - padding) for stride-aligned slabs."""
    if layer.op not in ("conv2d", "conv3d", "maxpool", "avgpool"):
        return 0, 0
    k, s, p = layer.extent[0], layer.stride[0], (layer.padding[0] if layer.padding else 0)  # a dilated kernel's reach
    return p, max(k - s - p, 0)


class _SyncBatchNorm(nn.Module):
    """Training-mode batch norm whose statistics are all-reduced over `group` (autograd-aware)."""

    def __init__(self, bn: nn.modules.batchnorm._BatchNorm, group):
        super().__init__()
        self.weight, self.bias, self.eps, self.group = bn.weight, bn.bias, bn.eps, group

    def forward(self, x):
        dims = [d for d in range(x.dim()) if d != 1]
        count = torch.tensor(float(x.numel() // x.shape[1]), dtype=x.dtype)
        stats = torch.cat([x.sum(dims), (x * x).sum(dims), count.view(1)])
        stats = comm.all_reduce_sum(stats, self.group, "sum")
        c = x.shape[1]
        total = stats[2 * c]
        mean = stats[:c] / total
        var = stats[c:2 * c] / total - mean * mean
        shape = [1, c] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)


class _SplitConv(nn.Module):
    """A conv or pool on the local slab: halo exchange, then the op with no padding along the split dim."""

    def __init__(self, module: nn.Module, layer: Layer, group):
        super().__init__()
        self.before, self.after = halo_rows(layer)
        self.group = group
        padding = list(layer.padding) if layer.padding else [0] * len(layer.kernel)
        padding[0] = 0
        if isinstance(module, (nn.Conv2d, nn.Conv3d)):
            module.padding = tuple(padding)
        elif any(padding):
            module.padding = tuple(padding)
        self.module = module

    def forward(self, x):
        return self.module(comm.halo_extend(x, SPLIT_DIM, self.before, self.after, self.group))


class SpatialReplica(Replica):
    def __init__(self, layers: list[Layer], modules: list[nn.Module], model_group, p_model: int, data_group=None, p_data: int = 1):
        super().__init__(modules, data_group, p_data)
        self.model_group, self.p_model = model_group, p_model
        self.split_count = next((i for i, l in enumerate(layers) if l.op in ("flatten", "linear")), len(layers))
        if self.split_count == len(layers):
            raise UserError("spatial split needs a flatten or linear layer to end the split part of the net")
        self._check(layers)
        self.split_modules = []
        for layer, module in zip(layers[:self.split_count], modules[:self.split_count]):
            if layer.op in ("conv2d", "conv3d", "maxpool", "avgpool"):
                module = _SplitConv(module, layer, model_group)
            elif layer.op == "batchnorm":
                module = _SyncBatchNorm(module, model_group)
            self.split_modules.append(module)

    def _check(self, layers: list[Layer]) -> None:
        for layer in layers[:self.split_count]:
            if layer.transposed:
                raise UserError(f"spatial split: layer {layer.name} is a transposed convolution, which the measured "
                                "runner does not split (the prediction does)")
            length_in, length_out = layer.input_shape[1], layer.output_shape[1]
            if length_in % self.p_model or length_out % self.p_model:
                raise UserError(f"spatial split over {self.p_model} ranks: layer {layer.name} has split-dim size "
                                f"{length_in} -> {length_out}, not divisible by {self.p_model}")
            before, after = halo_rows(layer)
            local_in = length_in // self.p_model
            if layer.op in ("maxpool", "avgpool") and (before or after):
                raise UserError(f"spatial split: pooling layer {layer.name} needs kernel == stride and no padding along the split dim")
            if max(before, after) > local_in:
                raise UserError(f"spatial split over {self.p_model} ranks: layer {layer.name} needs a halo of "
                                f"{max(before, after)} rows but holds only {local_in}")
            if layer.stride and local_in % layer.stride[0]:
                raise UserError(f"spatial split: layer {layer.name}'s local slab {local_in} is not a multiple of its stride")
            if layer.op in ("conv2d", "conv3d", "maxpool", "avgpool"):
                # each rank's slab with its halo must give exactly its share of the serial output (a window
                # without padding along the split dim gives the last rank rows the serial layer never computes)
                local_out = window_output_size(before + local_in + after, layer.extent[0], layer.stride[0], 0)
                if local_out != length_out // self.p_model:
                    raise UserError(f"spatial split over {self.p_model} ranks: layer {layer.name} (kernel "
                                    f"{layer.kernel[0]}, stride {layer.stride[0]}, padding {before}) gives each rank "
                                    f"{local_out} output rows, not its share {length_out // self.p_model}")

    def local_batch(self, x, y):
        x, y = super().local_batch(x, y)
        return x.chunk(self.p_model, dim=SPLIT_DIM)[comm.dist.get_rank(self.model_group)].contiguous(), y

    def forward(self, x, y):
        for module in self.split_modules:
            x = module(x)
        if self.split_count < len(self.modules):
            x = comm.gather(x, SPLIT_DIM, self.model_group, "slice")
        for module in self.modules[self.split_count:]:
            x = module(x)
        return F.cross_entropy(x, y)

    def sync_grads(self) -> None:
        split_params = [p for m in self.modules[:self.split_count] for p in m.parameters()]
        comm.all_reduce_grads(split_params, self.model_group)
        super().sync_grads()
