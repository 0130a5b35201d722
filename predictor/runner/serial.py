"""Serial training on one device, with optional recompute (activation checkpointing) and, on GPU,
activation offload to host memory (docs/method.md §15, §16; KARMA, Wahib et al., SC'20, swaps and recomputes)."""
from __future__ import annotations

import contextlib

import torch
from torch import nn
from predictor.runner.nets import loss
from torch.utils.checkpoint import checkpoint_sequential

from predictor.runner.replica import Replica
from profiler.errors import UserError


class Checkpointed(nn.Module):
    """A chain run under torch.utils.checkpoint in `segments` segments: only segment inputs are kept, and
    each segment's forward runs again during backward."""

    def __init__(self, chain: nn.Sequential, segments: int):
        super().__init__()
        self.chain = chain
        self.segments = segments

    def forward(self, x):
        return checkpoint_sequential(self.chain, self.segments, x, use_reentrant=False)


class SerialReplica(Replica):
    """The whole net on this device. recompute_segments > 0 checkpoints the chain in that many segments.
    offload=True keeps saved activations in pinned host memory (torch.autograd.graph.save_on_cpu)."""

    def __init__(self, modules, data_group=None, p_data=1, recompute_segments: int = 0, offload: bool = False):
        super().__init__(modules, data_group, p_data)
        if offload and not torch.cuda.is_available():
            raise UserError("strategy offload needs a CUDA GPU (activations are offloaded from device to host memory)")
        if recompute_segments > len(modules):
            raise UserError(f"recompute_segments {recompute_segments} exceeds the {len(modules)} layers of the net")
        chain = nn.Sequential(*modules)
        self.net = Checkpointed(chain, recompute_segments) if recompute_segments else chain
        self.offload = offload

    def forward(self, x, y):
        context = torch.autograd.graph.save_on_cpu(pin_memory=True) if self.offload else contextlib.nullcontext()
        with context:
            return loss(self.net(x), y)
