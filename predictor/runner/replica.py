"""What every strategy implementation gives the measurement loop: this rank's share of one training step.

A `Replica` is built on every rank from the same serial net (nets.build_serial). The loop calls
`local_batch` once (outside the timed region), then per iteration `forward` -> `backward` -> `sync_grads`
-> optimizer step over `parameters()`. `serial_grads()` (tests only) returns this rank's gradients in the
serial net's layout, gathering shards where needed, keyed "<layer index>.<param name>".
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from predictor.runner.nets import loss
from profiler.errors import UserError


class Replica:
    """Base: a replicated chain of modules trained on this rank's slice of the batch."""

    def __init__(self, modules: list[nn.Module], data_group=None, p_data: int = 1):
        self.modules = modules
        self.data_group = data_group
        self.p_data = p_data

    def parameters(self) -> list[nn.Parameter]:
        return [p for m in self.modules for p in m.parameters()]

    def data_index(self) -> int:
        return dist.get_rank(self.data_group) if self.p_data > 1 else 0

    def local_batch(self, x: torch.Tensor, y: torch.Tensor):
        """This rank's share of the global batch (the data-parallel slice)."""
        if self.p_data == 1:
            return x, y
        if x.shape[0] % self.p_data:
            raise UserError(f"batch {x.shape[0]} is not divisible by {self.p_data} data-parallel replicas")
        return x.chunk(self.p_data)[self.data_index()].contiguous(), y.chunk(self.p_data)[self.data_index()]

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for module in self.modules:
            x = module(x)
        return loss(x, y)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def sync_grads(self) -> None:
        """Average gradients over the data-parallel group (mean loss per data slice -> global mean)."""
        if self.p_data > 1:
            from predictor.runner.comm import all_reduce_grads

            all_reduce_grads(self.parameters(), self.data_group, divide_by=self.p_data)

    def serial_grads(self) -> dict[str, torch.Tensor]:
        return {f"{i}.{name}": p.grad for i, m in enumerate(self.modules) for name, p in m.named_parameters()}
