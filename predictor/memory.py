"""Memory per device: what PyTorch keeps alive during one training step.

ParaDL counts 2·δ·Σ[b(|x|+|y|) + |w|] and drops optimizer state, BN/ReLU activations and the DDP buffers; here
each term is the tensor PyTorch actually holds: weights (+ a half copy under autocast), fp32 gradients, optimizer
state, every distinct tensor some layer saves for its backward (counted once; for transformer layers Korthikanti
et al.'s 34·s·b·h + 5·a·s²·b plus the norms' statistics), communication buffers, and the workspace the backward's
peak adds. docs/method.md §5 (the tensors each op saves, the backward peak), §3a (transformer ops) and §23
(against ParaDL's formula).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from predictor.graph import UNARY_OPS, ModelGraph
from predictor.layercost import ACT_BYTES, MIXED_DTYPES, OPTIMIZER_STATE_WORDS
from profiler.opmath import LOSS_ELEMENT_BYTES, TOKEN_ID_BYTES

SAVES_INPUT = ("conv2d", "conv3d", "linear", "batchnorm", "maxpool", "avgpool", "silu", "layernorm", "rmsnorm", "gelu",
               "router", *UNARY_OPS)  # a scale and a reduction keep nothing (their gradients need only dy)
#: a router keeps its softmax's output too; MoE's dispatch keeps only its token indices (integers, left out)
SAVES_OUTPUT = ("relu", "sigmoid", "softmax", "sdpa", "router")
#: every tensor input, for the other's gradient (a product with a number saves nothing); MoE's combine keeps the
#: expert outputs and the router's probabilities (the weighted sum's two gradients)
SAVES_INPUTS = ("mul", "moe_combine", "bcast")
SAVES_OPERANDS = ("bmm", "sdpa")  # every tensor input, however many
#: bytes per row of the float32 statistics a norm saves (mean and rstd, or rstd alone)
NORM_STATS_BYTES = {"layernorm": 8, "rmsnorm": 4}


#: bytes per element of a tensor that only linear layers keep, under plan dtype fp8: Transformer Engine keeps the FP8
#: copy of a linear layer's input its forward cast (for the weight gradient), not the bf16 tensor
FP8_SAVED_BYTES = 1


@dataclass(frozen=True)
class SavedTensor:
    """A tensor kept for backward: produced by layer `producer` (-1 = model input), `elems` per sample,
    `bytes_per_elem` None = the activation dtype, `savers` = indices of the layers that keep it, `linear_only`:
    every one of them is a linear layer."""

    producer: int
    elems: int
    bytes_per_elem: int | None
    savers: tuple[int, ...]
    linear_only: bool = False

    def size_bytes(self, dtype: str) -> float:
        """Bytes per sample under plan dtype `dtype` (predictor.plan.DTYPES)."""
        if self.bytes_per_elem is not None:
            return self.elems * self.bytes_per_elem
        if dtype == "fp8" and self.linear_only:
            return self.elems * FP8_SAVED_BYTES
        return self.elems * ACT_BYTES[dtype]


@lru_cache(maxsize=64)
def saved_tensors(graph: ModelGraph) -> tuple[SavedTensor, ...]:
    index = {l.name: i for i, l in enumerate(graph.layers)}

    def resolve(name: str) -> int:
        while name:  # views alias their producer's storage
            i = index[name]
            layer = graph.layers[i]
            if layer.op != "flatten":
                return i
            name = layer.inputs[0] if layer.inputs else ""
        return -1

    savers: dict[int, list[int]] = {}
    extra: list[SavedTensor] = []
    for i, layer in enumerate(graph.layers):
        if layer.op in SAVES_INPUT:
            src = resolve(layer.inputs[0] if layer.inputs else "")
            savers.setdefault(src, []).append(i)
        if (layer.op in SAVES_INPUTS and len(layer.inputs) > 1) or layer.op in SAVES_OPERANDS:
            for src in dict.fromkeys(resolve(name) for name in layer.inputs):
                savers.setdefault(src, []).append(i)
        if layer.op in SAVES_OUTPUT:
            savers.setdefault(i, []).append(i)
        if layer.op == "maxpool":
            extra.append(SavedTensor(i, layer.output_elems, 8, (i,)))
        if layer.op in ("dropout", "bias_dropout_add"):
            extra.append(SavedTensor(i, layer.output_elems, 1, (i,)))
        if layer.op in NORM_STATS_BYTES:
            extra.append(SavedTensor(i, math.prod(layer.output_shape[:-1]), NORM_STATS_BYTES[layer.op], (i,)))
        if layer.op == "sdpa":  # the log-sum-exp of each query row
            extra.append(SavedTensor(i, math.prod(layer.output_shape[:-1]), 4, (i,)))
        if layer.op == "embedding":
            extra.append(SavedTensor(i, layer.input_elems, TOKEN_ID_BYTES, (i,)))
        if layer.op == "cross_entropy":
            extra.append(SavedTensor(i, layer.input_elems, LOSS_ELEMENT_BYTES, (i,)))
    out = []
    for src, who in savers.items():
        elems = math.prod(graph.input_shape) if src < 0 else graph.layers[src].output_elems
        out.append(SavedTensor(src, elems, None, tuple(who), all(graph.layers[i].op == "linear" for i in who)))
    return tuple(out + extra)


def input_gradient_elems(layer) -> int:
    """Elements of the gradients a layer's backward produces for its inputs, per sample: its input's, and for
    attention the other operands' too (fused attention's dK and dV have dQ's shape in self-attention; a
    batched matmul's second operand is (..., K, N)); the loss's backward holds a dense gradient of the
    log-probabilities (nll_loss_backward) while log_softmax_backward writes the logits' gradient."""
    if layer.op == "cross_entropy":
        return 2 * layer.input_elems
    if layer.op == "sdpa":
        return 3 * layer.input_elems
    if layer.op == "bmm" and len(layer.output_shape) >= 2:
        return layer.input_elems + math.prod(layer.output_shape[:-2]) * layer.input_shape[-1] * layer.output_shape[-1]
    return layer.input_elems


def gradient_bytes_per_param(dtype: str, mixed_precision: str = "autocast") -> float:
    """Bytes of one parameter's gradient, as it is kept and all-reduced: 2 under mixed precision with half-precision
    parameters (plan.MIXED_PRECISIONS "half"), else 4."""
    return 2.0 if dtype in MIXED_DTYPES and mixed_precision == "half" else 4.0


def parameter_bytes(params: float, dtype: str, optimizer: str,
                    mixed_precision: str = "autocast") -> tuple[float, float, float]:
    """(weights, grads, optimizer state) bytes for `params` parameters on one device. Mixed precision keeps fp32
    weights and a half copy (autocast), or half weights and fp32 master weights ("half"): 6 bytes either way;
    gradients gradient_bytes_per_param."""
    weights = params * (4 + (2 if dtype in MIXED_DTYPES else 0))
    grads = params * gradient_bytes_per_param(dtype, mixed_precision)
    return weights, grads, params * 4.0 * OPTIMIZER_STATE_WORDS[optimizer]


def backward_peak_extra(graph: ModelGraph, saved: tuple[SavedTensor, ...], dtype: str, share,
                        grad_share) -> float:
    """Per-sample bytes the backward peak adds on top of all saved tensors (see the module docstring).

    share(t): fraction of saved tensor t on one device; grad_share(i): fraction of layer i's activation
    gradients on one device."""
    act_bytes = ACT_BYTES[dtype]
    weighted = [(min(t.savers), t.size_bytes(dtype) * share(t)) for t in saved]
    total = sum(b for _, b in weighted)
    alive_until = [0.0] * (len(graph.layers) + 1)  # bytes of tensors whose first saver is layer i
    for first, b in weighted:
        alive_until[first] += b
    alive = 0.0
    worst = total
    for i, layer in enumerate(graph.layers):
        alive += alive_until[i]
        if layer.op in ("flatten",):
            continue
        first = all(x == "" for x in (layer.inputs or ("",)))
        grads = (layer.output_elems + (0 if first else input_gradient_elems(layer))) * act_bytes * grad_share(i)
        worst = max(worst, alive + grads)
    return worst - total
