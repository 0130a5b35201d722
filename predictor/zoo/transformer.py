"""Transformer blocks for the zoo's GPT and BERT, written as HuggingFace's GPT-2 and BERT modules are (one fused
QKV linear split into heads, explicit views and transposes), so the tracer sees what it sees in such models.

`attention="sdpa"` runs F.scaled_dot_product_attention (fused; the tracer's `sdpa` layer); `"math"` the
unfused score and context products with a softmax and attention dropout between them (bmm, softmax, dropout
layers), whose saved tensors are those of Korthikanti et al. 2022's activation-memory count.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ATTENTION = ("sdpa", "math")
MLPS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")


class SelfAttention(nn.Module):
    """Multi-head self-attention: QKV projection, per-head attention, output projection, residual dropout."""

    def __init__(self, hidden: int, heads: int, seq: int, dropout: float, causal: bool, attention: str):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
        if attention not in ATTENTION:
            raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, got {attention!r}")
        self.hidden, self.heads, self.head_dim = hidden, heads, hidden // heads
        self.causal, self.attention, self.p = causal, attention, dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        if causal and attention == "math":
            self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1)[None, None],
                                 persistent=False)

    def forward(self, x):
        batch = x.size(0)
        q, k, v = self.qkv(x).split(self.hidden, dim=2)
        q = q.view(batch, -1, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, -1, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, -1, self.heads, self.head_dim).transpose(1, 2)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                               is_causal=self.causal)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            if self.causal:
                scores = scores.masked_fill(self.future, float("-inf"))
            y = torch.matmul(self.attn_drop(F.softmax(scores, dim=-1)), v)
        y = y.transpose(1, 2).reshape(batch, -1, self.hidden)
        return self.resid_drop(self.proj(y))


class MLP(nn.Module):
    """gelu: fc2(GELU(fc(x))); swiglu (LLaMA's, Shazeer 2020): fc2(SiLU(fc(x)) * gate(x)), no biases."""

    def __init__(self, hidden: int, ffn: int, dropout: float, kind: str = "gelu"):
        super().__init__()
        if kind not in MLPS:
            raise ValueError(f"mlp must be one of {', '.join(MLPS)}, got {kind!r}")
        bias = kind == "gelu"
        self.fc = nn.Linear(hidden, ffn, bias=bias)
        self.gate = nn.Linear(hidden, ffn, bias=False) if kind == "swiglu" else None
        self.act = nn.GELU() if kind == "gelu" else nn.SiLU()
        self.fc2 = nn.Linear(ffn, hidden, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.act(self.fc(x))
        if self.gate is not None:
            h = h * self.gate(x)
        return self.drop(self.fc2(h))


def norm_layer(hidden: int, kind: str) -> nn.Module:
    if kind not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}")
    return nn.LayerNorm(hidden) if kind == "layernorm" else nn.RMSNorm(hidden)


class Block(nn.Module):
    """pre_norm (GPT-2): x + attn(ln1(x)), then x + mlp(ln2(x)); post-norm (BERT): ln1(x + attn(x)), then
    ln2(x + mlp(x))."""

    def __init__(self, hidden: int, heads: int, seq: int, ffn: int, dropout: float, causal: bool, attention: str,
                 pre_norm: bool, mlp: str = "gelu", norm: str = "layernorm"):
        super().__init__()
        self.pre_norm = pre_norm
        self.ln1 = norm_layer(hidden, norm)
        self.attn = SelfAttention(hidden, heads, seq, dropout, causal, attention)
        self.ln2 = norm_layer(hidden, norm)
        self.mlp = MLP(hidden, ffn, dropout, mlp)

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


def check_sizes(layers: int, hidden: int, heads: int, seq: int, vocab: int, ffn: int) -> None:
    for knob, value in (("layers", layers), ("hidden", hidden), ("heads", heads), ("seq", seq), ("vocab", vocab),
                        ("ffn", ffn)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{knob} must be a positive integer, got {value!r}")


def input_shape(seq: int = 32, **_) -> tuple[int, ...]:
    """One sample: `seq` token ids."""
    return (seq,)
