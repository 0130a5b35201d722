"""AlexNet (Krizhevsky et al. 2012, torchvision's single-tower variant); knobs: width (64 at full size),
fc width, image size (>= 63), classes."""
from __future__ import annotations

import torch.nn as nn


class AlexNet(nn.Module):
    def __init__(self, width: int = 64, fc: int = 4096, num_classes: int = 1000, image: int = 224, in_channels: int = 3):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, w, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(w, 3 * w, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(3 * w, 6 * w, 3, padding=1), nn.ReLU(),
            nn.Conv2d(6 * w, 4 * w, 3, padding=1), nn.ReLU(),
            nn.Conv2d(4 * w, 4 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        side = ((image + 4 - 11) // 4 + 1 - 3) // 2 + 1
        side = (side - 3) // 2 + 1
        side = (side - 3) // 2 + 1
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(4 * w * side * side, fc), nn.ReLU(),
                                        nn.Dropout(), nn.Linear(fc, fc), nn.ReLU(), nn.Linear(fc, num_classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def alexnet(width: int = 64, fc: int = 4096, num_classes: int = 1000, image: int = 224, in_channels: int = 3) -> AlexNet:
    return AlexNet(width, fc, num_classes, image, in_channels)


def input_shape(image: int = 224, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)
