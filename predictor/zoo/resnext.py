"""ResNeXt-101 32x4d (Xie et al. 2017) and SE-ResNeXt-101 32x4d (Hu et al. 2018), on predictor.zoo.resnet.ResNet.

ResNeXt-101 32x4d is torchvision's resnext101_32x4d (groups 32, width_per_group 4, blocks 3, 4, 23, 3) and
DeepLearningExamples' resnext101-32x4d (the same convolutions): bottleneck width int(planes * 4 / 64) * 32, output
planes * 4. SE-ResNeXt adds a squeeze-and-excitation module to every block, reducing the channels 16-fold (48.96 M
parameters; docs/method.md §1 on DeepLearningExamples' PyTorch reading). Knobs: width (planes of the first stage,
64 at full size), groups (32), base_width (4), image size, classes, input channels; a bottleneck keeps at least one
channel per group.
"""
from __future__ import annotations

from predictor.zoo.resnet import ResNet, input_shape  # noqa: F401 - the zoo registry reads input_shape here

BLOCKS_101 = (3, 4, 23, 3)
SE_REDUCTION = 16


def resnext101_32x4d(width: int = 64, groups: int = 32, base_width: int = 4, num_classes: int = 1000,
                     image: int = 224, in_channels: int = 3) -> ResNet:
    return ResNet(BLOCKS_101, width, num_classes, in_channels, groups=groups, base_width=base_width)


def se_resnext101_32x4d(width: int = 64, groups: int = 32, base_width: int = 4, num_classes: int = 1000,
                        image: int = 224, in_channels: int = 3) -> ResNet:
    return ResNet(BLOCKS_101, width, num_classes, in_channels, groups=groups, base_width=base_width,
                  se_reduction=SE_REDUCTION)
