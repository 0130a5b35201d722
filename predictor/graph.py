"""Per-layer model description that every strategy model consumes (`Layer`, `ModelGraph`).

Shapes and FLOPs are per sample (ParaDL's |x_l|, |y_l| are per-sample element counts, its technical report's
notation table); a strategy multiplies by its per-device batch. Shapes exclude the
batch dimension: (C, H, W) for 2-D layers, (C, D, H, W) for 3-D, (features,) for linear layers. Transformer
layers keep the token dimensions: (seq, hidden) for token activations and linear layers on them (every token is
a row of the linear's GEMM), (heads, seq, head_dim) for attention's per-head tensors, (heads, seq, seq) for its
scores, (seq,) for token ids.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from profiler.dtypes import dtype_bytes  # noqa: F401 - the predictor's callers read it here
from profiler.opmath import dilated_extent

#: element-wise functions of one tensor a model written in primitives calls (predictor.zoo.tf_ops), one kernel each
UNARY_OPS = ("tanh", "pow", "rsqrt", "sqrt", "exp")
#: reductions over some dimensions of one tensor
REDUCE_OPS = ("mean", "sum")
#: ops through which no gradient flows (a random tensor of an input's shape, a comparison)
NO_GRADIENT_OPS = ("random", "compare")
#: how routed tokens reach expert ranks on other nodes: "alltoall" (NCCL's all-to-all, one copy per routed slot) or
#: "deepep" (DeepEP / HybridEP: a token crosses to each node once, then fans out over NVLink; docs/method.md §14b)
DISPATCHERS = ("alltoall", "deepep")


@dataclass(frozen=True)
class Layer:
    """One layer. op: conv2d, conv3d, linear, batchnorm, relu, silu, sigmoid, maxpool, avgpool, add, mul,
    concat, flatten, dropout, softmax_loss, and for transformers embedding, layernorm, rmsnorm, gelu, softmax,
    bmm (a batched matrix product of two activations: input_shape is its first operand), sdpa (fused scaled
    dot-product attention: input_shape is the query), cross_entropy (the loss over the last dimension of its
    input, one target per row), copy (a reshape that copies a transposed tensor into a contiguous one) (the
    set the cost models know; tracers report anything else by name); mixture of experts: router, moe_dispatch,
    moe_combine and a `linear` with groups = E experts (docs/method.md §3c); primitive ops (predictor.trace).

    inputs: names of the layers feeding this one ("" = the model input); lets residual/concat graphs keep
    their structure. kernel/stride/padding are per spatial dimension (empty for non-spatial ops).
    flops_*: per sample. params: trainable parameter count (weights + bias)."""

    name: str
    op: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    weight_shape: tuple[int, ...] = ()
    params: int = 0
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    groups: int = 1
    #: conv2d/conv3d: the kernel's dilation per spatial dim (empty: 1); transposed: a ConvTranspose (its forward is
    #: the backward-data pass of the convolution from its output's shape to its input's, docs/method.md §1)
    dilation: tuple[int, ...] = ()
    transposed: bool = False
    flops_fwd: float = 0.0
    flops_bwd_data: float = 0.0
    flops_bwd_weight: float = 0.0
    inputs: tuple[str, ...] = ()
    causal: bool = False  # sdpa: a causal mask (fused kernels skip the masked half)
    #: moe_dispatch: the experts' capacity factor (each expert takes at most capacity_factor x its mean share of the
    #: routed tokens, the rest dropped; 0 = dropless). Its `groups` is the expert count, as a grouped linear's
    capacity_factor: float = 0.0
    #: moe_dispatch: how tokens reach experts on other nodes (one of DISPATCHERS)
    dispatcher: str = ""

    @property
    def tied(self) -> bool:
        """A linear layer whose weight another layer owns (a language-model head tied to its embedding): its
        params count its bias at most, yet autograd computes its weight gradient (summed into the owner's)."""
        return self.op == "linear" and bool(self.weight_shape) and self.params < math.prod(self.weight_shape)

    @property
    def input_elems(self) -> int:
        return math.prod(self.input_shape)

    @property
    def output_elems(self) -> int:
        return math.prod(self.output_shape)

    @property
    def channels_in(self) -> int:
        return self.input_shape[0] if self.input_shape else 0

    @property
    def channels_out(self) -> int:
        return self.output_shape[0] if self.output_shape else 0

    @cached_property
    def halo_width(self) -> tuple[int, ...]:
        """Rows/columns a spatial split needs from each neighbour per spatial dim: the kernel's reach beyond
        a stride-aligned block, (k - 1) // 2 for 'same' padding (ParaDL's code too; docs/method.md §10), k the
        dilated kernel's extent; a transposed convolution's reach on its input, that divided by its stride."""
        reach = tuple(max(k - 1, 0) // 2 if p else max(k - s, 0) for k, s, p in zip(self.extent, self.stride, self.padding))
        if self.transposed:
            return tuple(-(-r // max(s, 1)) for r, s in zip(reach, self.stride))
        return reach

    @property
    def extent(self) -> tuple[int, ...]:
        """The kernel's extent per spatial dim: (k - 1) d + 1 for dilation d."""
        return dilated_extent(self.kernel, self.dilation or (1,) * len(self.kernel))


@dataclass(frozen=True)
class ModelGraph:
    """A model as an ordered list of layers (topological order) and its per-sample input shape."""

    name: str
    input_shape: tuple[int, ...]
    layers: tuple[Layer, ...]
    unsupported: tuple[str, ...] = field(default=())  # layer names/types a tracer could not describe

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def flops_per_sample(self) -> float:
        return sum(l.flops_fwd + l.flops_bwd_data + l.flops_bwd_weight for l in self.layers)
