"""Inception-v3 (Szegedy et al. 2016) as in torchvision, without the auxiliary classifier (training
memory/time of the main tower). Knob: width scales every branch's channel count (1.0 = full size);
image side >= 75."""
from __future__ import annotations

import torch
import torch.nn as nn


class ConvBN(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class InceptionA(nn.Module):
    def __init__(self, c_in: int, pool: int, s):
        super().__init__()
        self.b1 = ConvBN(c_in, s(64), 1)
        self.b5 = nn.Sequential(ConvBN(c_in, s(48), 1), ConvBN(s(48), s(64), 5, padding=2))
        self.b3 = nn.Sequential(ConvBN(c_in, s(64), 1), ConvBN(s(64), s(96), 3, padding=1), ConvBN(s(96), s(96), 3, padding=1))
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.bp = ConvBN(c_in, pool, 1)
        self.out = s(64) + s(64) + s(96) + pool

    def forward(self, x):
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(self.pool(x))], 1)


class InceptionB(nn.Module):
    def __init__(self, c_in: int, s):
        super().__init__()
        self.b3 = ConvBN(c_in, s(384), 3, stride=2)
        self.b3d = nn.Sequential(ConvBN(c_in, s(64), 1), ConvBN(s(64), s(96), 3, padding=1), ConvBN(s(96), s(96), 3, stride=2))
        self.pool = nn.MaxPool2d(3, stride=2)
        self.out = s(384) + s(96) + c_in

    def forward(self, x):
        return torch.cat([self.b3(x), self.b3d(x), self.pool(x)], 1)


class InceptionC(nn.Module):
    def __init__(self, c_in: int, c7: int, s):
        super().__init__()
        self.b1 = ConvBN(c_in, s(192), 1)
        self.b7 = nn.Sequential(ConvBN(c_in, c7, 1), ConvBN(c7, c7, (1, 7), padding=(0, 3)), ConvBN(c7, s(192), (7, 1), padding=(3, 0)))
        self.b7d = nn.Sequential(ConvBN(c_in, c7, 1), ConvBN(c7, c7, (7, 1), padding=(3, 0)), ConvBN(c7, c7, (1, 7), padding=(0, 3)),
                                 ConvBN(c7, c7, (7, 1), padding=(3, 0)), ConvBN(c7, s(192), (1, 7), padding=(0, 3)))
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.bp = ConvBN(c_in, s(192), 1)
        self.out = 4 * s(192)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b7(x), self.b7d(x), self.bp(self.pool(x))], 1)


class InceptionD(nn.Module):
    def __init__(self, c_in: int, s):
        super().__init__()
        self.b3 = nn.Sequential(ConvBN(c_in, s(192), 1), ConvBN(s(192), s(320), 3, stride=2))
        self.b7 = nn.Sequential(ConvBN(c_in, s(192), 1), ConvBN(s(192), s(192), (1, 7), padding=(0, 3)),
                                ConvBN(s(192), s(192), (7, 1), padding=(3, 0)), ConvBN(s(192), s(192), 3, stride=2))
        self.pool = nn.MaxPool2d(3, stride=2)
        self.out = s(320) + s(192) + c_in

    def forward(self, x):
        return torch.cat([self.b3(x), self.b7(x), self.pool(x)], 1)


class InceptionE(nn.Module):
    def __init__(self, c_in: int, s):
        super().__init__()
        self.b1 = ConvBN(c_in, s(320), 1)
        self.b3 = ConvBN(c_in, s(384), 1)
        self.b3a = ConvBN(s(384), s(384), (1, 3), padding=(0, 1))
        self.b3b = ConvBN(s(384), s(384), (3, 1), padding=(1, 0))
        self.bd = nn.Sequential(ConvBN(c_in, s(448), 1), ConvBN(s(448), s(384), 3, padding=1))
        self.bda = ConvBN(s(384), s(384), (1, 3), padding=(0, 1))
        self.bdb = ConvBN(s(384), s(384), (3, 1), padding=(1, 0))
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.bp = ConvBN(c_in, s(192), 1)
        self.out = s(320) + 4 * s(384) + s(192)

    def forward(self, x):
        a = self.b3(x)
        d = self.bd(x)
        return torch.cat([self.b1(x), self.b3a(a), self.b3b(a), self.bda(d), self.bdb(d), self.bp(self.pool(x))], 1)


class InceptionV3(nn.Module):
    def __init__(self, width: float = 1.0, num_classes: int = 1000, in_channels: int = 3):
        super().__init__()

        def s(c: int) -> int:
            return max(1, int(round(c * width)))

        self.stem = nn.Sequential(
            ConvBN(in_channels, s(32), 3, stride=2), ConvBN(s(32), s(32), 3), ConvBN(s(32), s(64), 3, padding=1),
            nn.MaxPool2d(3, stride=2), ConvBN(s(64), s(80), 1), ConvBN(s(80), s(192), 3), nn.MaxPool2d(3, stride=2))
        blocks = []
        c = s(192)
        for pool in (s(32), s(64), s(64)):
            blocks.append(InceptionA(c, pool, s))
            c = blocks[-1].out
        blocks.append(InceptionB(c, s))
        c = blocks[-1].out
        for c7 in (s(128), s(160), s(160), s(192)):
            blocks.append(InceptionC(c, c7, s))
            c = blocks[-1].out
        blocks.append(InceptionD(c, s))
        c = blocks[-1].out
        for _ in range(2):
            blocks.append(InceptionE(c, s))
            c = blocks[-1].out
        self.blocks = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout()
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.fc(self.dropout(self.flatten(self.avgpool(self.blocks(self.stem(x))))))


def inception_v3(width: float = 1.0, num_classes: int = 1000, image: int = 299, in_channels: int = 3) -> InceptionV3:
    return InceptionV3(width, num_classes, in_channels)


def input_shape(image: int = 299, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)
