"""Transformer blocks for the zoo's GPT and BERT, written as HuggingFace's GPT-2 and BERT modules are (one fused
QKV linear split into heads, explicit views and transposes), so the tracer sees what it sees in such models.

`attention=`: "sdpa" (F.scaled_dot_product_attention, fused), "math" (score and context products with the scale,
causal mask, softmax and dropout as separate passes, as HuggingFace's GPT-2 and NVIDIA's BERT write them) or
"fused-softmax" (Megatron-LM's attention: one FusedScaleMaskSoftmax kernel between the two products, traced as one
`softmax` layer); with the last two the tensors kept for backward are Korthikanti et al.'s. `residual=`: "add"
(dropout, then add) or "bias-dropout-add" (Megatron-LM's fused kernel, one `bias_dropout_add` layer). Megatron's
bias + GELU and apex's fused layer norm already move what the `gelu` and `layernorm` layers move. `experts=E` makes
every MLP a mixture of E experts (`MoE`, docs/method.md §3c). Traffic, sources and where each runs: docs/method.md
§3a; docs/validation.md ("Published transformer runs").
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from predictor.graph import DISPATCHERS

ATTENTION = ("sdpa", "math", "fused-softmax")
MLPS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")
RESIDUALS = ("add", "bias-dropout-add")


class FusedScaleMaskSoftmax(nn.Module):
    """softmax(scale · x, masked) over the last dimension as one op (named after Megatron-LM's module, which the
    tracer also makes one `softmax` layer). causal: the future keys of each query masked (the upper triangle of
    each (seq, seq) score matrix, as Megatron's scaled_upper_triang_masked_softmax kernel computes it)."""

    def __init__(self, scale: float, causal: bool, seq: int):
        super().__init__()
        self.scale, self.causal = scale, causal
        if causal:
            self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1)[None, None],
                                 persistent=False)

    def forward(self, x):
        x = x * self.scale
        if self.causal:
            x = x.masked_fill(self.future, float("-inf"))
        return torch.softmax(x, dim=-1)


class MaskAdder(nn.Module):
    """BERT's padding mask as an additive term on the attention scores: (1 - mask) * -10000, broadcast over the heads
    (Google's modeling.attention_layer, NVIDIA's and HuggingFace's BertSelfAttention: attention_scores +
    attention_mask). A full sequence's mask is all zeros here; the add still runs, one pass over the scores."""

    def __init__(self, seq: int):
        super().__init__()
        self.register_buffer("adder", torch.zeros(1, 1, 1, seq), persistent=False)

    def forward(self, scores):
        return scores + self.adder


class BiasDropoutAdd(nn.Module):
    """residual + dropout(x) as one op (Megatron-LM's bias_dropout_add_fused_train, the bias left in the linear
    that made x; the tracer makes it one `bias_dropout_add` layer). Reads x first, then the residual."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x, residual):
        return residual + F.dropout(x, self.p, self.training)


class SelfAttention(nn.Module):
    """Multi-head self-attention: QKV projection, per-head attention, output projection, residual dropout. kv_heads
    < heads: grouped-query attention (Ainslie et al. 2023; LLaMA-2 70B, Mixtral), keys and values of kv_heads heads
    each shared by heads / kv_heads query heads (fused attention only: F.scaled_dot_product_attention's enable_gqa).
    head_dim: each head's width where it is not hidden / heads (Qwen3: 32 heads of 128 on a 2048 hidden), so the
    queries are heads x head_dim wide and the output projection maps that width back to hidden."""

    def __init__(self, hidden: int, heads: int, seq: int, dropout: float, causal: bool, attention: str,
                 drop_out: bool = True, kv_heads: int | None = None, head_dim: int | None = None):
        super().__init__()
        if head_dim is None and hidden % heads:
            raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
        if head_dim is not None and (not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim < 1):
            raise ValueError(f"head_dim must be a positive integer, got {head_dim!r}")
        if attention not in ATTENTION:
            raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, got {attention!r}")
        kv_heads = heads if kv_heads is None else kv_heads
        if not isinstance(kv_heads, int) or isinstance(kv_heads, bool) or kv_heads < 1 or heads % kv_heads:
            raise ValueError(f"kv_heads must be a positive divisor of heads {heads}, got {kv_heads!r}")
        if kv_heads != heads and attention != "sdpa":
            raise ValueError(f"kv_heads {kv_heads} < heads {heads} (grouped-query attention) needs attention=sdpa")
        self.head_dim = hidden // heads if head_dim is None else head_dim
        self.heads, self.kv_heads, self.width = heads, kv_heads, heads * self.head_dim
        self.causal, self.attention, self.p = causal, attention, dropout
        self.qkv = nn.Linear(hidden, self.width + 2 * kv_heads * self.head_dim)
        self.proj = nn.Linear(self.width, hidden)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout) if drop_out else None  # else fused into the residual add
        if causal and attention == "math":
            self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1)[None, None],
                                 persistent=False)
        if attention == "fused-softmax":
            self.softmax = FusedScaleMaskSoftmax(1.0 / math.sqrt(self.head_dim), causal, seq)
        self.mask_adder: nn.Module | None = None  # BERT's additive padding mask on "math" scores (MaskAdder)

    def forward(self, x):
        batch, kv = x.size(0), self.kv_heads * self.head_dim
        # indexed, not unpacked: unpacking a torch.fx Proxy disassembles the caller's bytecode on every call (a fifth
        # of tracing a deep model); the graph is the same three getitem nodes
        parts = self.qkv(x).split(self.width if kv == self.width else (self.width, kv, kv), dim=2)
        q, k, v = parts[0], parts[1], parts[2]
        q = q.view(batch, -1, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, -1, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, -1, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.attention == "sdpa" and self.kv_heads != self.heads:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                               is_causal=self.causal, enable_gqa=True)
        elif self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                               is_causal=self.causal)
        elif self.attention == "fused-softmax":
            y = torch.matmul(self.attn_drop(self.softmax(torch.matmul(q, k.transpose(-2, -1)))), v)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            if self.mask_adder is not None:
                scores = self.mask_adder(scores)
            if self.causal:
                scores = scores.masked_fill(self.future, float("-inf"))
            y = torch.matmul(self.attn_drop(F.softmax(scores, dim=-1)), v)
        y = self.proj(y.transpose(1, 2).reshape(batch, -1, self.width))
        return y if self.resid_drop is None else self.resid_drop(y)


class MLP(nn.Module):
    """gelu: fc2(GELU(fc(x))); swiglu (LLaMA's, Shazeer 2020): fc2(SiLU(fc(x)) * gate(x)), no biases; then
    dropout unless drop_out is False (fused into the residual add)."""

    def __init__(self, hidden: int, ffn: int, dropout: float, kind: str = "gelu", drop_out: bool = True):
        super().__init__()
        if kind not in MLPS:
            raise ValueError(f"mlp must be one of {', '.join(MLPS)}, got {kind!r}")
        bias = kind == "gelu"
        self.fc = nn.Linear(hidden, ffn, bias=bias)
        self.gate = nn.Linear(hidden, ffn, bias=False) if kind == "swiglu" else None
        self.act = nn.GELU() if kind == "gelu" else nn.SiLU()
        self.fc2 = nn.Linear(ffn, hidden, bias=bias)
        self.drop = nn.Dropout(dropout) if drop_out else None

    def forward(self, x):
        h = self.act(self.fc(x))
        if self.gate is not None:
            h = h * self.gate(x)
        y = self.fc2(h)
        return y if self.drop is None else self.drop(y)


class Router(nn.Module):
    """Each token's softmax over E expert logits (one bias-free linear, Mixtral's and Megatron-Core's TopKRouter;
    its top-k is taken by the dispatch and the combine). Traced as one `router` layer."""

    def __init__(self, hidden: int, experts: int):
        super().__init__()
        self.experts = experts
        self.weight = nn.Parameter(torch.empty(experts, hidden))
        nn.init.normal_(self.weight, std=0.02)

    def output_size(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (*shape[:-1], self.experts)

    def forward(self, x):
        return torch.softmax(F.linear(x, self.weight), dim=-1)


class TokenDispatch(nn.Module):
    """(x, router probabilities) -> each token's copy for each of its top-k experts, grouped by expert (Megatron-Core's
    permute): (..., s, h) -> (..., s·k, h). capacity_factor and dispatcher (DISPATCHERS) are what the cost model
    reads (docs/method.md §3c, §14b); this forward drops nothing. One `moe_dispatch` layer."""

    def __init__(self, experts: int, top_k: int, capacity_factor: float, dispatcher: str = "alltoall"):
        super().__init__()
        self.experts, self.top_k, self.capacity_factor = experts, top_k, capacity_factor
        self.dispatcher = dispatcher

    def forward(self, x, probs):
        order = probs.topk(self.top_k, dim=-1).indices.flatten(1).argsort(dim=1, stable=True)
        rows = torch.div(order, self.top_k, rounding_mode="floor")
        return x.gather(1, rows.unsqueeze(-1).expand(-1, -1, x.size(-1)))


class ExpertLinear(nn.Module):
    """E experts' linear layers over the dispatched tokens (Megatron-Core's GroupedMLP): weight (E, out, in). Traced as
    a `linear` with groups = E, costed as E GEMMs over each expert's tokens. This forward deals the slots to the
    experts in E contiguous blocks of (near) equal size (the balanced routing the cost model assumes): it has the
    shapes, not a trained router's assignment, and runs as the grouped GEMM it is costed as (one batched product
    when E divides the slots, one product per expert otherwise), so a measured step does the FLOPs predicted."""

    def __init__(self, experts: int, in_features: int, out_features: int, bias: bool):
        super().__init__()
        self.experts, self.in_features, self.out_features = experts, in_features, out_features
        self.weight = nn.Parameter(torch.empty(experts, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(experts, out_features)) if bias else None
        nn.init.normal_(self.weight, std=0.02)

    def output_size(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (*shape[:-1], self.out_features)

    def forward(self, z):
        slots, experts = z.size(-2), self.experts
        if slots % experts == 0:  # equal blocks: one batched product over the experts
            blocks = z.unflatten(-2, (experts, slots // experts))
            y = torch.einsum("...eni,eoi->...eno", blocks, self.weight)
            if self.bias is not None:
                y = y + self.bias[:, None, :]
            return y.flatten(-3, -2)
        # slot i to expert floor(i E / slots): expert e's block starts at ceil(e slots / E)
        starts = [-(-e * slots // experts) for e in range(experts + 1)]
        outs = [F.linear(z[..., a:b, :], self.weight[e], None if self.bias is None else self.bias[e])
                for e, (a, b) in enumerate(zip(starts, starts[1:]))]
        return torch.cat(outs, dim=-2)


class TokenCombine(nn.Module):
    """(expert outputs grouped by expert, router probabilities) -> each token's top-k outputs weighted by their
    probabilities and summed (Megatron-Core's unpermute): (..., s·k, h) -> (..., s, h). One `moe_combine` layer."""

    def __init__(self, experts: int, top_k: int):
        super().__init__()
        self.experts, self.top_k = experts, top_k

    def forward(self, y, probs):
        weights, chosen = probs.topk(self.top_k, dim=-1)
        order = chosen.flatten(1).argsort(dim=1, stable=True)
        back = torch.empty_like(y).scatter_(1, order.unsqueeze(-1).expand_as(y), y)
        return (back.view(*weights.shape, y.size(-1)) * weights.unsqueeze(-1)).sum(-2)


class MoE(nn.Module):
    """A mixture-of-experts MLP (Shazeer et al. 2017; GShard; Mixtral): router, dispatch to each token's top_k of
    `experts` MLPs of width ffn (GELU with biases, or SwiGLU without), combine, dropout unless drop_out is False."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int, capacity_factor: float, dropout: float,
                 kind: str = "gelu", drop_out: bool = True, dispatcher: str = "alltoall"):
        super().__init__()
        if kind not in MLPS:
            raise ValueError(f"mlp must be one of {', '.join(MLPS)}, got {kind!r}")
        bias = kind == "gelu"
        self.router = Router(hidden, experts)
        self.dispatch = TokenDispatch(experts, top_k, capacity_factor, dispatcher)
        self.fc = ExpertLinear(experts, hidden, ffn, bias)
        self.gate = ExpertLinear(experts, hidden, ffn, False) if kind == "swiglu" else None
        self.act = nn.GELU() if kind == "gelu" else nn.SiLU()
        self.fc2 = ExpertLinear(experts, ffn, hidden, bias)
        self.combine = TokenCombine(experts, top_k)
        self.drop = nn.Dropout(dropout) if drop_out else None

    def forward(self, x):
        probs = self.router(x)
        z = self.dispatch(x, probs)
        h = self.act(self.fc(z))
        if self.gate is not None:
            h = h * self.gate(z)
        y = self.combine(self.fc2(h), probs)
        return y if self.drop is None else self.drop(y)


def check_experts(experts: int, top_k: int, capacity_factor: float, dispatcher: str = "alltoall") -> None:
    """experts = 0 (dense MLPs) or >= 2; 1 <= top_k <= experts; capacity_factor 0 (dropless) or positive; dispatcher
    one of DISPATCHERS."""
    if dispatcher not in DISPATCHERS:
        raise ValueError(f"dispatcher must be one of {', '.join(DISPATCHERS)}, got {dispatcher!r}")
    for knob, value in (("experts", experts), ("top_k", top_k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{knob} must be a non-negative integer, got {value!r}")
    if experts == 1:
        raise ValueError("experts must be 0 (dense MLPs) or at least 2, got 1")
    if experts and not 1 <= top_k <= experts:
        raise ValueError(f"top_k must be 1..experts ({experts}), got {top_k}")
    if isinstance(capacity_factor, bool) or not isinstance(capacity_factor, (int, float)) \
            or not 0 <= capacity_factor < float("inf"):
        raise ValueError(f"capacity_factor must be 0 (dropless) or a positive number, got {capacity_factor!r}")


def norm_layer(hidden: int, kind: str) -> nn.Module:
    if kind not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}")
    return nn.LayerNorm(hidden) if kind == "layernorm" else nn.RMSNorm(hidden)


class Block(nn.Module):
    """pre_norm (GPT-2): x + attn(ln1(x)), then x + mlp(ln2(x)); post-norm (BERT): ln1(x + attn(x)), then
    ln2(x + mlp(x)). residual="bias-dropout-add": each branch's dropout and its residual add as one
    BiasDropoutAdd. experts > 0: the MLP is a MoE."""

    def __init__(self, hidden: int, heads: int, seq: int, ffn: int, dropout: float, causal: bool, attention: str,
                 pre_norm: bool, mlp: str = "gelu", norm: str = "layernorm", residual: str = "add", experts: int = 0,
                 top_k: int = 2, capacity_factor: float = 1.25, kv_heads: int | None = None,
                 head_dim: int | None = None, dispatcher: str = "alltoall"):
        super().__init__()
        if residual not in RESIDUALS:
            raise ValueError(f"residual must be one of {', '.join(RESIDUALS)}, got {residual!r}")
        fused = residual == "bias-dropout-add"
        self.pre_norm = pre_norm
        self.ln1 = norm_layer(hidden, norm)
        self.attn = SelfAttention(hidden, heads, seq, dropout, causal, attention, drop_out=not fused, kv_heads=kv_heads,
                                  head_dim=head_dim)
        self.ln2 = norm_layer(hidden, norm)
        self.mlp = MoE(hidden, ffn, experts, top_k, capacity_factor, dropout, mlp, drop_out=not fused,
                       dispatcher=dispatcher) if experts \
            else MLP(hidden, ffn, dropout, mlp, drop_out=not fused)
        self.add1 = BiasDropoutAdd(dropout) if fused else None
        self.add2 = BiasDropoutAdd(dropout) if fused else None

    def _add(self, fused: nn.Module | None, branch, residual):
        return residual + branch if fused is None else fused(branch, residual)

    def forward(self, x):
        if self.pre_norm:
            x = self._add(self.add1, self.attn(self.ln1(x)), x)
            return self._add(self.add2, self.mlp(self.ln2(x)), x)
        x = self.ln1(self._add(self.add1, self.attn(x), x))
        return self.ln2(self._add(self.add2, self.mlp(x), x))


def check_sizes(layers: int, hidden: int, heads: int, seq: int, vocab: int, ffn: int) -> None:
    for knob, value in (("layers", layers), ("hidden", hidden), ("heads", heads), ("seq", seq), ("vocab", vocab),
                        ("ffn", ffn)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{knob} must be a positive integer, got {value!r}")


def input_shape(seq: int = 32, **_) -> tuple[int, ...]:
    """One sample: `seq` token ids."""
    return (seq,)
