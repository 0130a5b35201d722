"""EfficientNet-B0 and -B4 (Tan & Le 2019), as torchvision's efficientnet_b0/efficientnet_b4 build them.

Stem 3x3/2 conv, seven stages of MBConv blocks (inverted residuals: 1x1 expansion, kxk depthwise conv,
squeeze-and-excitation with SiLU and a sigmoid gate, 1x1 projection; a residual add where stride 1 keeps the
channels), a 1x1 head conv, global average pool, dropout, linear classifier. Channels are width * the B0 channels
rounded to multiples of 8, blocks per stage ceil(depth * the B0 count). Stochastic depth is left out
(docs/method.md §1, the zoo's departures). Knobs: width, depth (1.0, 1.0 for B0 at image 224; 1.4, 1.8 for B4 at
image 380), image, num_classes, in_channels, dropout (0.2 for B0, 0.4 for B4).
"""
from __future__ import annotations

import math

import torch.nn as nn

from predictor.zoo.squeeze import SqueezeExcitation

#: B0 stages: (expand ratio, kernel, stride, input channels, output channels, blocks)
B0_STAGES = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
             (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))


def make_divisible(value: float, divisor: int = 8) -> int:
    """`value` rounded to the nearest multiple of `divisor` (at least one), never more than 10% below it."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(c_out)]
    if act:
        layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class MBConv(nn.Module):
    def __init__(self, c_in: int, c_out: int, expand: int, kernel: int, stride: int):
        super().__init__()
        hidden = make_divisible(c_in * expand)
        layers = [conv_bn(c_in, hidden, 1)] if hidden != c_in else []
        layers += [conv_bn(hidden, hidden, kernel, stride, groups=hidden),
                   SqueezeExcitation(hidden, max(1, c_in // 4), nn.SiLU),
                   conv_bn(hidden, c_out, 1, act=False)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        out = self.block(x)
        return out + x if self.residual else out


def _stage(c_in: int, c_out: int, expand: int, kernel: int, stride: int, blocks: int) -> nn.Sequential:
    return nn.Sequential(*(MBConv(c_in if i == 0 else c_out, c_out, expand, kernel, stride if i == 0 else 1)
                           for i in range(blocks)))


class EfficientNet(nn.Module):
    def __init__(self, width: float = 1.0, depth: float = 1.0, num_classes: int = 1000, in_channels: int = 3,
                 dropout: float = 0.2):
        super().__init__()
        stem = make_divisible(B0_STAGES[0][3] * width)
        layers = [conv_bn(in_channels, stem, 3, 2)]
        c = stem
        for expand, kernel, stride, _, c_out, blocks in B0_STAGES:
            c_out = make_divisible(c_out * width)
            layers.append(_stage(c, c_out, expand, kernel, stride, int(math.ceil(blocks * depth))))
            c = c_out
        layers.append(conv_bn(c, 4 * c, 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(4 * c, num_classes)

    def forward(self, x):
        return self.fc(self.dropout(self.flatten(self.avgpool(self.features(x)))))


def efficientnet_b0(width: float = 1.0, depth: float = 1.0, num_classes: int = 1000, image: int = 224,
                    in_channels: int = 3, dropout: float = 0.2) -> EfficientNet:
    return EfficientNet(width, depth, num_classes, in_channels, dropout)


def efficientnet_b4(width: float = 1.4, depth: float = 1.8, num_classes: int = 1000, image: int = 380,
                    in_channels: int = 3, dropout: float = 0.4) -> EfficientNet:
    return EfficientNet(width, depth, num_classes, in_channels, dropout)


def input_shape_b0(image: int = 224, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)


def input_shape_b4(image: int = 380, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)
