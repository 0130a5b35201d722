"""BERT as TensorFlow's code writes it, op for op: the GELU, layer norm and dropout of Google's
BERT modeling.py (which NVIDIA's DeepLearningExamples TensorFlow BERT keeps), built from the primitive ops a
TensorFlow 1 graph runs one kernel each, where PyTorch calls one fused op. The tracer sees every primitive as a
layer (`pow`, `tanh`, `mean`, `rsqrt`, `random`, `compare`, `scale`, `bcast`, `add`, `mul`; predictor.trace), so a
TensorFlow run without XLA is costed kernel by kernel. Same parameters as the PyTorch modules they replace.
docs/method.md §3a ("Ops as the code writes them").
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn


class TFGelu(nn.Module):
    """modeling.gelu: cdf = 0.5 * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3)))); x * cdf. Eight kernels."""

    def forward(self, x):
        cdf = 0.5 * (1.0 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))
        return x * cdf


class TFLayerNorm(nn.Module):
    """tf.contrib.layers.layer_norm over the last dimension: nn.moments (mean; squared difference from it; mean)
    then nn.batch_normalization (rsqrt(variance + eps) * gamma; x * that; + (beta - mean * that)). The per-token
    statistics are small tensors; the passes over x are the mean, the squared difference, its mean, the scale and
    the shift. Parameters: gamma and beta, as nn.LayerNorm's weight and bias (held by the first op that reads each:
    predictor.trace)."""

    def __init__(self, hidden: int, eps: float = 1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        variance = torch.pow(x - mean, 2).mean(-1, keepdim=True)  # SquaredDifference: here a subtraction and a square
        inv = torch.rsqrt(variance + self.eps) * self.weight
        return x * inv + (self.bias - mean * inv)


class TFDropout(nn.Module):
    """tf.nn.dropout (TensorFlow 1.15): random_uniform of x's shape, keep_mask = random >= rate, x * scale *
    cast(keep_mask). Four kernels over x's size (the cast is taken as a view here)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        keep = torch.rand_like(x) >= self.p
        return x * (1.0 / (1.0 - self.p)) * keep.to(x.dtype)


def as_tensorflow_ops(model: nn.Module) -> nn.Module:
    """`model` with every GELU, layer norm and dropout replaced by TensorFlow BERT's primitives (the zoo BERT's
    `ops="tf"`); the parameters are the same."""
    for name, child in list(model.named_children()):
        if isinstance(child, nn.GELU):
            setattr(model, name, TFGelu())
        elif isinstance(child, nn.LayerNorm):
            setattr(model, name, TFLayerNorm(child.normalized_shape[-1], eps=1e-12))
        elif isinstance(child, nn.Dropout) and child.p > 0:
            setattr(model, name, TFDropout(child.p))
        else:
            as_tensorflow_ops(child)
    return model
