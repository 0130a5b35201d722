"""ResNet (He et al. 2016) with bottleneck blocks, v1.5 (stride in the 3x3 conv), as in torchvision and
NVIDIA DeepLearningExamples ("resnet50_v1.5"); knobs: width (channels of the first stage, 64 at full size),
blocks per stage, image size, classes.

The same class builds ResNeXt (Xie et al. 2017; torchvision's `groups`/`width_per_group`): the 3x3 conv is
grouped and the bottleneck is int(planes * base_width / 64) * groups wide, and SE-ResNeXt (Hu et al. 2018):
a squeeze-and-excitation module scales the last batchnorm's output before the residual add, as in NVIDIA
DeepLearningExamples' Bottleneck (predictor.zoo.resnext has those builders)."""
from __future__ import annotations

import torch.nn as nn

from predictor.zoo.squeeze import SqueezeExcitation


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in: int, planes: int, stride: int, groups: int = 1, base_width: int = 64,
                 se_reduction: int = 0):
        super().__init__()
        c_out = planes * self.expansion
        width = max(1, planes * base_width // 64) * groups
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        self.se = SqueezeExcitation(c_out, max(1, c_out // se_reduction)) if se_reduction else None
        self.relu3 = nn.ReLU()

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.se is not None:
            out = self.se(out)
        return self.relu3(out + identity)


class ResNet(nn.Module):
    """groups, base_width: ResNeXt cardinality and per-group width (1, 64 = ResNet); se_reduction: channel
    reduction of a squeeze-and-excitation module in every block (0 = none)."""

    def __init__(self, blocks=(3, 4, 6, 3), width: int = 64, num_classes: int = 1000, in_channels: int = 3,
                 groups: int = 1, base_width: int = 64, se_reduction: int = 0):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers = []
        c_in = width
        for stage, count in enumerate(blocks):
            w = width * 2 ** stage
            for i in range(count):
                layers.append(Bottleneck(c_in, w, 2 if (i == 0 and stage > 0) else 1, groups, base_width,
                                         se_reduction))
                c_in = w * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(self.flatten(self.avgpool(self.layers(x))))


def resnet50(width: int = 64, num_classes: int = 1000, image: int = 224, in_channels: int = 3) -> ResNet:
    return ResNet((3, 4, 6, 3), width, num_classes, in_channels)


def resnet101(width: int = 64, num_classes: int = 1000, image: int = 224, in_channels: int = 3) -> ResNet:
    return ResNet((3, 4, 23, 3), width, num_classes, in_channels)


def resnet152(width: int = 64, num_classes: int = 1000, image: int = 224, in_channels: int = 3) -> ResNet:
    return ResNet((3, 8, 36, 3), width, num_classes, in_channels)


def resnet_custom(blocks=(1, 1, 1, 1), width: int = 16, num_classes: int = 10, image: int = 64,
                  in_channels: int = 3) -> ResNet:
    """A down-scaled ResNet (depth via blocks per stage, width via the first stage's channels)."""
    return ResNet(tuple(blocks), width, num_classes, in_channels)


def input_shape(image: int = 224, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)
