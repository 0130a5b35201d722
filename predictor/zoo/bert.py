"""An encoder BERT trained as a masked language model (Devlin et al. 2019's layout: word, position and
token-type embeddings with a layer norm, post-norm blocks with bidirectional self-attention and a 4h GELU
MLP, and the MLM head: dense, GELU, layer norm, a decoder tied to the word embedding with its own bias).
Defaults are small so CPU tests are fast; BERT-base is layers=12, hidden=768, heads=12, seq=512,
vocab=30522. Parameters: 12 h^2 + 13 h per layer (ffn = 4h), (vocab + seq + 2) h + 2 h embeddings,
h^2 + 3 h + vocab in the head. `mlm_positions=P` runs the head on P positions per sequence, as Google's BERT
and the codes built on it gather the masked positions (run_pretraining.py get_masked_lm_output:
max_predictions_per_seq); 0: every token. `ops="tf"`: GELU, layer norm and dropout as TensorFlow's BERT writes
them (predictor.zoo.tf_ops)."""
from __future__ import annotations

import torch
import torch.nn as nn

from predictor.zoo import MODEL_CODE
from predictor.zoo.tf_ops import as_tensorflow_ops
from predictor.zoo.transformer import Block, MaskAdder, check_sizes, input_shape  # noqa: F401 - input_shape: the zoo's


class BERT(nn.Module):
    def __init__(self, layers: int = 2, hidden: int = 64, heads: int = 4, seq: int = 32, vocab: int = 512,
                 ffn: int | None = None, dropout: float = 0.1, attention: str = "sdpa", mlm_positions: int = 0,
                 ops: str = "torch"):
        super().__init__()
        ffn = 4 * hidden if ffn is None else ffn
        check_sizes(layers, hidden, heads, seq, vocab, ffn)
        if not isinstance(mlm_positions, int) or isinstance(mlm_positions, bool) or not 0 <= mlm_positions <= seq:
            raise ValueError(f"mlm_positions must be 0 (every token) or 1..seq ({seq}), got {mlm_positions!r}")
        if ops not in MODEL_CODE:
            raise ValueError(f"ops must be one of {', '.join(MODEL_CODE)}, got {ops!r}")
        self.mlm_positions = mlm_positions
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.register_buffer("positions", torch.arange(seq)[None], persistent=False)
        self.register_buffer("types", torch.zeros(1, seq, dtype=torch.long), persistent=False)
        self.ln = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*(Block(hidden, heads, seq, ffn, dropout, False, attention, False)
                                      for _ in range(layers)))
        self.dense = nn.Linear(hidden, hidden)
        self.act = nn.GELU()
        self.ln_head = nn.LayerNorm(hidden)
        self.decoder = nn.Linear(hidden, vocab)
        self.decoder.weight = self.word.weight
        for block in self.blocks:  # the padding mask the "math" attention adds to its scores
            if block.attn.attention == "math":
                block.attn.mask_adder = MaskAdder(seq)
        if ops == "tf":
            as_tensorflow_ops(self)

    def forward(self, ids):
        x = self.word(ids) + self.pos(self.positions) + self.token_type(self.types)
        x = self.blocks(self.drop(self.ln(x)))
        if self.mlm_positions:  # the masked positions' rows (a gather of P x hidden per sequence, left uncosted)
            x = x[:, :self.mlm_positions]
        return self.decoder(self.ln_head(self.act(self.dense(x))))


def bert(**knobs) -> nn.Module:
    return BERT(**knobs)
