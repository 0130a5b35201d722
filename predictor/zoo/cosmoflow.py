"""CosmoFlow-style 3-D CNN (Mathuriya et al. 2018; MLPerf HPC CosmoFlow): conv3d + ReLU + max-pool
blocks doubling channels, then three dense layers predicting 4 cosmological parameters.
Knobs: width (first conv's filters, 32 in MLPerf), conv blocks, cube side (128 in MLPerf), fc width, kernel: 3 (MLPerf
HPC v1.0 on, padding 1) or 2 (the v0.7 reference's default, Keras padding 'same': TensorFlow pads the input by one at
the far end of each dimension, a copy, before the convolution)."""
from __future__ import annotations

import torch.nn as nn


class CosmoFlow(nn.Module):
    def __init__(self, width: int = 32, blocks: int = 5, image: int = 128, in_channels: int = 4, fc: int = 128,
                 outputs: int = 4, kernel: int = 3):
        super().__init__()
        if kernel not in (2, 3):
            raise ValueError(f"kernel must be 2 or 3, got {kernel!r}")
        layers = []
        c = in_channels
        side = image
        for k in range(blocks):
            f = width * 2 ** k
            conv = [nn.Conv3d(c, f, 3, padding=1)] if kernel == 3 else [nn.ConstantPad3d((0, 1) * 3, 0.0),
                                                                         nn.Conv3d(c, f, 2)]
            layers += conv + [nn.ReLU(), nn.MaxPool3d(2)]
            c, side = f, side // 2
        self.features = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        self.head = nn.Sequential(nn.Linear(c * side ** 3, fc), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(fc, fc // 2), nn.ReLU(), nn.Dropout(0.5), nn.Linear(fc // 2, outputs))

    def forward(self, x):
        return self.head(self.flatten(self.features(x)))


def cosmoflow(width: int = 32, blocks: int = 5, image: int = 128, in_channels: int = 4, fc: int = 128,
              kernel: int = 3) -> CosmoFlow:
    return CosmoFlow(width, blocks, image, in_channels, fc, kernel=kernel)


def input_shape(image: int = 128, in_channels: int = 4, **_) -> tuple[int, ...]:
    return (in_channels, image, image, image)
