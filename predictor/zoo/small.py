"""Small 2-D and 3-D CNNs for CPU validation and tests (seconds per step on one core)."""
from __future__ import annotations

import torch.nn as nn


def small_cnn2d(width: int = 8, image: int = 32, in_channels: int = 3, num_classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(in_channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * width * (image // 4) ** 2, num_classes))


def small_cnn3d(width: int = 4, image: int = 16, in_channels: int = 1, num_classes: int = 4) -> nn.Module:
    return nn.Sequential(
        nn.Conv3d(in_channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
        nn.Conv3d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
        nn.Flatten(), nn.Linear(2 * width * (image // 4) ** 3, num_classes))


def input_shape_2d(image: int = 32, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)


def input_shape_3d(image: int = 16, in_channels: int = 1, **_) -> tuple[int, ...]:
    return (in_channels, image, image, image)
