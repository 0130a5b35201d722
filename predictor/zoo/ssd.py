"""SSD300 with a ResNet-34 backbone (Liu et al. 2016; MLPerf Training's single-stage detector, v0.5-v1.1): ResNet-34
to its third stage, whose first block keeps stride 1 (38 x 38 maps at 300 x 300), five extra blocks down to 1 x 1,
and a 3 x 3 box and class head on each of the six maps (4, 6, 6, 6, 4, 4 default boxes: 8732 in all), as the
reference's ssd300.py builds it. The loss (box matching, hard-negative mining) is left out: it reads the 8732 x 81
scores, little beside the backbone; the forward returns boxes and scores as one (4 + classes) x 8732 tensor. Knobs: width (the first stage's channels, 64 at full size), image, classes."""
from __future__ import annotations

import torch
import torch.nn as nn

#: default boxes per location of each feature map (MLPerf SSD300)
DEFAULT_BOXES = (4, 6, 6, 6, 4, 4)


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        self.relu2 = nn.ReLU()

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        return self.relu2(self.bn2(self.conv2(out)) + identity)


def _extra(c_in: int, mid: int, c_out: int, stride: int, padding: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                         nn.Conv2d(mid, c_out, 3, stride=stride, padding=padding, bias=False), nn.BatchNorm2d(c_out),
                         nn.ReLU())


class SSD300(nn.Module):
    def __init__(self, width: int = 64, num_classes: int = 81, in_channels: int = 3):
        super().__init__()
        layers = [nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                  nn.MaxPool2d(3, stride=2, padding=1)]
        c_in = width
        for stage, (count, stride) in enumerate(zip((3, 4, 6), (1, 2, 1))):  # the third stage keeps stride 1
            c_out = width * 2 ** stage
            for i in range(count):
                layers.append(BasicBlock(c_in, c_out, stride if i == 0 else 1))
                c_in = c_out
        self.backbone = nn.Sequential(*layers)
        maps = [c_in, 2 * c_in, 2 * c_in, c_in, c_in, c_in]  # 256, 512, 512, 256, 256, 256 at full width
        mids = [c_in, c_in, c_in // 2, c_in // 2, c_in // 2]
        self.extras = nn.ModuleList(_extra(a, m, b, 2 if i < 3 else 1, 1 if i < 3 else 0)
                                    for i, (a, m, b) in enumerate(zip(maps[:-1], mids, maps[1:])))
        self.num_classes = num_classes
        self.loc = nn.ModuleList(nn.Conv2d(c, n * 4, 3, padding=1) for c, n in zip(maps, DEFAULT_BOXES))
        self.conf = nn.ModuleList(nn.Conv2d(c, n * num_classes, 3, padding=1) for c, n in zip(maps, DEFAULT_BOXES))

    def forward(self, x):
        x = self.backbone(x)
        features = [x]
        for block in self.extras:
            x = block(x)
            features.append(x)
        n = features[0].shape[0]
        locs = torch.cat([head(f).reshape(n, 4, -1) for head, f in zip(self.loc, features)], 2)
        confs = torch.cat([head(f).reshape(n, self.num_classes, -1) for head, f in zip(self.conf, features)], 2)
        return torch.cat([locs, confs], 1)  # (N, 4 + classes, 8732): every default box's offsets and scores


def ssd300(width: int = 64, num_classes: int = 81, image: int = 300, in_channels: int = 3) -> SSD300:
    return SSD300(width, num_classes, in_channels)


def input_shape(image: int = 300, in_channels: int = 3, **_) -> tuple[int, ...]:
    return (in_channels, image, image)
