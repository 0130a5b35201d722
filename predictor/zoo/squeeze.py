"""Squeeze-and-excitation (Hu et al. 2018, "Squeeze-and-Excitation Networks"): global average pool, a 1x1
conv (with bias) down to `squeeze` channels, an activation, a 1x1 conv back up, a sigmoid, and the block's
input multiplied by that per-channel scale. The 1x1-conv form is torchvision.ops.SqueezeExcitation's and
NVIDIA DeepLearningExamples' (PyTorch ConvNets, models/common.py)."""
from __future__ import annotations

import torch.nn as nn


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeeze: int, activation: type[nn.Module] = nn.ReLU):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, squeeze, 1)
        self.act = activation()
        self.expand = nn.Conv2d(squeeze, channels, 1)
        self.gate = nn.Sigmoid()

    def forward(self, x):
        scale = self.gate(self.expand(self.act(self.reduce(self.pool(x)))))
        return x * scale
