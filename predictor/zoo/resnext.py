"""ResNeXt-101 32x4d (Xie et al. 2017, "Aggregated Residual Transformations for Deep Neural Networks") and
SE-ResNeXt-101 32x4d (Hu et al. 2018, "Squeeze-and-Excitation Networks"), on predictor.zoo.resnet.ResNet.

ResNeXt-101 32x4d is torchvision's resnext101_32x4d (groups=32, width_per_group=4, blocks 3, 4, 23, 3) and
NVIDIA DeepLearningExamples' resnext101-32x4d (same convolutions, written as widths 128..1024, expansion 2):
bottleneck width int(planes * 4 / 64) * 32, output planes * 4.

SE-ResNeXt adds a squeeze-and-excitation module to every block (global average pool, 1x1 conv reducing the
channels 16-fold, ReLU, 1x1 conv back, sigmoid, times the last batchnorm's output, then the residual add), as
in DeepLearningExamples' SE-ResNeXt101-32x4d. The reduction is a ratio of 16 (Hu et al.; DeepLearningExamples'
TensorFlow version, `se_ratio: 16`): 48.96 M parameters. Its PyTorch version passes 16 as the squeezed channel
count itself, which would give about 45.3 M.

Knobs: width (planes of the first stage, 64 at full size), groups (cardinality, 32), base_width (channels per
group at width 64, 4), image size, classes, input channels; a bottleneck keeps at least one channel per group.
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
