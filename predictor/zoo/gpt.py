"""A decoder-only GPT (GPT-2's layout: token and learned position embeddings, pre-norm blocks with causal
self-attention and a 4h GELU MLP, a final layer norm, a language-model head tied to the token embedding).
Defaults are small so CPU tests are fast; GPT-2 small is layers=12, hidden=768, heads=12, seq=1024,
vocab=50257. Parameters: 12 h^2 + 13 h per layer (ffn = 4h), (vocab + seq) h embeddings, 2 h final norm.
`mlp="swiglu"` and `norm="rmsnorm"` give LLaMA's MLP (three bias-free projections of width ffn) and norms;
`attention="fused-softmax"` and `residual="bias-dropout-add"` Megatron-LM's fused kernels; `experts=E` (with
`top_k`, default 2, `capacity_factor`, default 1.25, 0 = dropless, and `dispatcher`, alltoall or deepep) a mixture
of E experts of width ffn in every layer; `kv_heads` grouped-query attention; `head_dim` heads narrower or wider than
hidden / heads (Qwen3) (predictor.zoo.transformer)."""
from __future__ import annotations

import torch
import torch.nn as nn

from predictor.zoo.transformer import Block, check_experts, check_sizes, input_shape, norm_layer  # noqa: F401 - input_shape: the zoo's


class GPT(nn.Module):
    def __init__(self, layers: int = 2, hidden: int = 64, heads: int = 4, seq: int = 32, vocab: int = 512,
                 ffn: int | None = None, dropout: float = 0.1, attention: str = "sdpa", tie: bool = True,
                 mlp: str = "gelu", norm: str = "layernorm", residual: str = "add", experts: int = 0, top_k: int = 2,
                 capacity_factor: float = 1.25, kv_heads: int | None = None, head_dim: int | None = None,
                 dispatcher: str = "alltoall"):
        super().__init__()
        ffn = 4 * hidden if ffn is None else ffn
        check_sizes(layers, hidden, heads, seq, vocab, ffn)
        check_experts(experts, top_k, capacity_factor, dispatcher)
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.register_buffer("positions", torch.arange(seq)[None], persistent=False)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*(Block(hidden, heads, seq, ffn, dropout, True, attention, True, mlp, norm,
                                            residual, experts, top_k, capacity_factor, kv_heads, head_dim,
                                            dispatcher)
                                      for _ in range(layers)))
        self.ln_f = norm_layer(hidden, norm)
        self.head = nn.Linear(hidden, vocab, bias=False)
        if tie:
            self.head.weight = self.tok.weight

    def forward(self, ids):
        x = self.drop(self.tok(ids) + self.pos(self.positions))
        return self.head(self.ln_f(self.blocks(x)))


def gpt(**knobs) -> nn.Module:
    return GPT(**knobs)
