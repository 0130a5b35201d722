"""VGG16 (Simonyan & Zisserman 2015, configuration D) without batchnorm, as in torchvision;
knobs: width (channels of the first block, 64 at full size), fc width, image size, classes."""
from __future__ import annotations

import torch.nn as nn

CFG16 = (1, 1, "M", 2, 2, "M", 4, 4, 4, "M", 8, 8, 8, "M", 8, 8, 8, "M")


class VGG(nn.Module):
    def __init__(self, width: int = 64, fc: int = 4096, num_classes: int = 1000, image: int = 224, in_channels: int = 3):
        super().__init__()
        layers = []
        c = in_channels
        for item in CFG16:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, width * item, 3, padding=1), nn.ReLU()]
                c = width * item
        self.features = nn.Sequential(*layers)
        side = image // 32
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(c * side * side, fc), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(fc, fc), nn.ReLU(), nn.Dropout(), nn.Linear(fc, num_classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def vgg16(width: int = 64, fc: int = 4096, num_classes: int = 1000, image: int = 224, in_channels: int = 3) -> VGG:
    return VGG(width, fc, num_classes, image, in_channels)


def input_shape(image: int = 224, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)
