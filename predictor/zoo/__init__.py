"""Built-in models as torch.nn.Modules, constructible at full or down-scaled size.

`ZOO[name]` = (builder, input_shape(kwargs) -> per-sample input shape). Every builder takes keyword knobs
(`width`, `image`, `depth`, `num_classes`, ...) so the validation runner can run small versions on CPU.
Activations are not in-place so the saved-tensor memory model (memory.py) describes exactly what autograd keeps.
"""
from __future__ import annotations

from typing import Callable

import torch.nn as nn

from predictor.zoo import alexnet, cosmoflow, efficientnet, inception, resnet, resnext, small, vgg

Builder = Callable[..., nn.Module]

ZOO: dict[str, tuple[Builder, Callable[..., tuple[int, ...]]]] = {
    "resnet50": (resnet.resnet50, resnet.input_shape),
    "resnet101": (resnet.resnet101, resnet.input_shape),
    "resnet152": (resnet.resnet152, resnet.input_shape),
    "resnext101_32x4d": (resnext.resnext101_32x4d, resnet.input_shape),
    "se_resnext101_32x4d": (resnext.se_resnext101_32x4d, resnet.input_shape),
    "efficientnet_b0": (efficientnet.efficientnet_b0, efficientnet.input_shape_b0),
    "efficientnet_b4": (efficientnet.efficientnet_b4, efficientnet.input_shape_b4),
    "resnet": (resnet.resnet_custom, resnet.input_shape),
    "vgg16": (vgg.vgg16, vgg.input_shape),
    "alexnet": (alexnet.alexnet, alexnet.input_shape),
    "inception_v3": (inception.inception_v3, inception.input_shape),
    "cosmoflow": (cosmoflow.cosmoflow, cosmoflow.input_shape),
    "small_cnn2d": (small.small_cnn2d, small.input_shape_2d),
    "small_cnn3d": (small.small_cnn3d, small.input_shape_3d),
}


def build(name: str, **knobs) -> tuple[nn.Module, tuple[int, ...]]:
    """The module and its per-sample input shape. Raises KeyError for an unknown name."""
    builder, shape = ZOO[name]
    return builder(**knobs), shape(**knobs)
