"""DeepCAM (Kurth et al. 2018; MLPerf HPC DeepCAM): DeepLabv3+ on a modified aligned Xception, output stride 16,
segmenting 16-channel 768 x 1152 climate images into 3 classes. Layer for layer NVIDIA's MLPerf HPC implementation
(mlcommons/hpc_results_v1.0 NVIDIA/benchmarks/deepcam/implementations/pytorch/src/deepCam/architecture/
deeplab_xception.py): depthwise-separable 3x3 convolutions, dilated in the exit flow (rate 2) and in the ASPP
(6, 12, 18), transposed 3x3 stride-2 convolutions upsampling back to the input. Its fused batch norm + ReLU is a
batch norm and a ReLU here; the pooled ASPP branch is broadcast (expand) where the original tiles it, and its
per-channel affine on 256 pooled values (TrainableAffine) is left out.
Knobs: width (the 32 of conv1; every channel count scales with it), image (height; the width is 1.5 x),
in_channels, classes."""
from __future__ import annotations

import torch
import torch.nn as nn


def _bn_relu(c: int, relu: bool = True) -> list[nn.Module]:
    return [nn.BatchNorm2d(c), nn.ReLU()] if relu else [nn.BatchNorm2d(c)]


def _separable(c_in: int, c_out: int, stride: int = 1, dilation: int = 1) -> list[nn.Module]:
    """SeparableConv2d_same: a depthwise 3x3 ('same' padding for its dilation) and a pointwise 1x1, no bias."""
    return [nn.Conv2d(c_in, c_in, 3, stride, dilation, dilation, groups=c_in, bias=False),
            nn.Conv2d(c_in, c_out, 1, bias=False)]


class Block(nn.Module):
    """Xception's residual block of `reps` separable convolutions (the original's Block, its fuse_relu and
    grow_first paths)."""

    def __init__(self, c_in: int, c_out: int, reps: int, stride: int = 1, dilation: int = 1, end_relu: bool = True,
                 fuse_relu: bool = True, grow_first: bool = True, is_last: bool = False):
        super().__init__()
        self.skip = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)) \
            if c_out != c_in or stride != 1 else None
        rep: list[nn.Module] = []
        c = c_in
        if grow_first:
            rep += _separable(c_in, c_out, 1, dilation) + _bn_relu(c_out)
            c = c_out
        for i in range(reps - 1):
            rep += _separable(c, c, 1, dilation) + _bn_relu(c, not fuse_relu or i < reps - 2 or not grow_first)
        if not grow_first:
            rep += _separable(c_in, c_out, 1, dilation) + _bn_relu(c_out, not fuse_relu)
        if not fuse_relu:
            rep = rep[:-1]  # the original drops the last ReLU
        if stride != 1:
            rep += _separable(c_out, c_out, stride)
        elif is_last:
            rep += _separable(c_out, c_out)
        self.rep = nn.Sequential(*rep)
        self.relu = nn.ReLU() if end_relu else None

    def forward(self, x):
        y = self.rep(x) + (self.skip(x) if self.skip is not None else x)
        return self.relu(y) if self.relu is not None else y


class DeepCAM(nn.Module):
    def __init__(self, width: int = 32, in_channels: int = 16, classes: int = 3):
        super().__init__()
        for knob, value in (("width", width), ("in_channels", in_channels), ("classes", classes)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{knob} must be a positive integer, got {value!r}")
        w = lambda c: max(1, c * width // 32)  # noqa: E731 - every channel count scales with conv1's
        self.stem = nn.Sequential(nn.Conv2d(in_channels, w(32), 3, 2, 1, bias=False), *_bn_relu(w(32)),
                                  nn.Conv2d(w(32), w(64), 3, 1, 1, bias=False), *_bn_relu(w(64)))
        self.block1 = Block(w(64), w(128), 2, stride=2, end_relu=False)
        self.relu = nn.ReLU()
        self.entry = nn.Sequential(Block(w(128), w(256), 2, stride=2),
                                   Block(w(256), w(728), 2, stride=2, fuse_relu=False, is_last=True))
        self.middle = nn.Sequential(*(Block(w(728), w(728), 3) for _ in range(16)))
        self.exit = nn.Sequential(
            Block(w(728), w(1024), 2, dilation=1, end_relu=False, grow_first=False, is_last=True),
            *_separable(w(1024), w(1536), dilation=2), *_bn_relu(w(1536)),
            *_separable(w(1536), w(1536), dilation=2), *_bn_relu(w(1536)),
            *_separable(w(1536), w(2048), dilation=2), *_bn_relu(w(2048)))
        c, a = w(2048), w(256)
        self.aspp = nn.ModuleList([nn.Sequential(nn.Conv2d(c, a, 1, bias=False), *_bn_relu(a))] + [
            nn.Sequential(nn.Conv2d(c, a, 3, 1, rate, rate, bias=False), *_bn_relu(a)) for rate in (6, 12, 18)])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, a, 1, bias=False), nn.ReLU())
        self.project = nn.Sequential(nn.Conv2d(5 * a, a, 1, bias=False), *_bn_relu(a))
        self.low = nn.Sequential(nn.Conv2d(w(128), w(48), 1, bias=False), *_bn_relu(w(48)))
        self.up1 = nn.Sequential(nn.ConvTranspose2d(a, a, 3, 2, 1, 1, bias=False), *_bn_relu(a),
                                 nn.ConvTranspose2d(a, a, 3, 2, 1, 1, bias=False), *_bn_relu(a))
        self.fuse = nn.Sequential(nn.Conv2d(a + w(48), a, 3, 1, 1, bias=False), *_bn_relu(a),
                                  nn.Conv2d(a, a, 3, 1, 1, bias=False), *_bn_relu(a), nn.Conv2d(a, a, 1))
        self.up2 = nn.Sequential(nn.ConvTranspose2d(a, a, 3, 2, 1, 1, bias=False), *_bn_relu(a),
                                 nn.ConvTranspose2d(a, classes, 3, 2, 1, 1, bias=False))

    def forward(self, x):
        low = self.block1(self.stem(x))
        x = self.exit(self.middle(self.entry(self.relu(low))))
        pooled = self.pool(x)
        branches = [branch(x) for branch in self.aspp] + [pooled.expand(-1, -1, x.shape[2], x.shape[3])]
        x = self.project(torch.cat(branches, 1))
        x = torch.cat((self.up1(x), self.low(low)), 1)
        return self.up2(self.fuse(x))


def deepcam(width: int = 32, image: int = 768, in_channels: int = 16, classes: int = 3) -> DeepCAM:
    return DeepCAM(width, in_channels, classes)


def input_shape(image: int = 768, in_channels: int = 16, **_) -> tuple[int, ...]:
    if image % 16:
        raise ValueError(f"image (height) must be a multiple of 16 (output stride), got {image!r}")
    return (in_channels, image, image * 3 // 2)
