"""profiler.opmath: output sizes and FLOPs, by hand, and defined nowhere else."""
from __future__ import annotations

import re
from pathlib import Path

import torch

from profiler.opmath import conv_flops, conv_output_volume, gemm_flops, window_output_dims, window_output_size

ROOT = Path(__file__).resolve().parents[2]


def test_window_output_size_matches_pytorch():
    for size, kernel, stride, padding in ((224, 7, 2, 3), (56, 3, 1, 1), (17, 3, 2, 0), (8, 1, 1, 0), (35, 5, 1, 2)):
        conv = torch.nn.Conv2d(1, 1, kernel, stride=stride, padding=padding)
        assert conv(torch.zeros(1, 1, size, size)).shape[-1] == window_output_size(size, kernel, stride, padding)
        pool = torch.nn.MaxPool2d(kernel, stride=stride, padding=min(padding, kernel // 2))
        p = min(padding, kernel // 2)
        assert pool(torch.zeros(1, 1, size, size)).shape[-1] == window_output_size(size, kernel, stride, p)
    assert window_output_dims((16, 8, 8), (3, 3, 3), (2, 1, 1), (1, 1, 1)) == (8, 8, 8)


def test_flops_by_hand():
    assert gemm_flops(2, 3, 4) == 48.0
    # ResNet-50's stem: 64 filters, 3 channels, 7x7, 112x112 out: 2 * 64 * 3 * 49 * 12544 per sample
    assert conv_flops(1, 3, 64, 49, 112 * 112) == 2 * 64 * 3 * 49 * 12544
    assert conv_output_volume((224, 224), (7, 7), (2, 2), (3, 3)) == 112 * 112
    assert conv_output_volume((2, 2), (3, 3), (1, 1), (0, 0)) == 1  # clamped to one position


def test_no_other_module_computes_a_window_size():
    """The output-size formula (size + 2p - k) // s + 1 lives only in profiler/opmath.py."""
    pattern = re.compile(r"\+ 2 \* \w+ - \w+\) // \w+ \+ 1")
    offenders = [str(p.relative_to(ROOT)) for pkg in ("kernels", "profiler", "calibrate", "predictor")
                 for p in (ROOT / pkg).rglob("*.py") if p.name != "opmath.py" and pattern.search(p.read_text())]
    assert offenders == []


def test_transformer_op_counts_by_hand():
    from profiler import opmath

    # a score product of 12 heads at seq 512, head size 64: 12 GEMMs of (512 x 64) x (64 x 512)
    assert opmath.bmm_flops(12, 512, 512, 64) == 12 * 2 * 512 * 512 * 64
    assert opmath.bmm_bytes(2, 3, 4, 5, 2) == 2 * 2 * (3 * 5 + 5 * 4 + 3 * 4)
    for pass_, (m, n, k) in (("bwd_data", (3, 5, 4)), ("bwd_weight", (5, 4, 3))):
        assert opmath.gemm_backward_shape(pass_, 3, 4, 5) == (m, n, k)
        assert gemm_flops(m, n, k) == gemm_flops(3, 4, 5)
    # FlashAttention-2's count: 4 s^2 d per head forward, 2.5x backward, half under a causal mask
    fwd = opmath.sdpa_flops(8, 1024, 1024, 64, "fwd", False)
    assert fwd == 4 * 8 * 1024 ** 2 * 64
    assert opmath.sdpa_flops(8, 1024, 1024, 64, "bwd_data", False) == 2.5 * fwd
    assert opmath.sdpa_flops(8, 1024, 1024, 64, "fwd", True) == fwd / 2
    # fused attention reads Q, K, V and writes O and a float32 log-sum-exp; backward reads Q, K, V, O, dO and
    # the log-sum-exp and writes dQ, dK, dV
    assert opmath.sdpa_bytes(2, 16, 16, 8, "fwd", 2) == 2 * 4 * (2 * 16 * 8) + 4 * 2 * 16
    assert opmath.sdpa_bytes(2, 16, 16, 8, "bwd_data", 2) == 2 * 8 * (2 * 16 * 8) + 4 * 2 * 16
    # layer norm reads x and writes y, its backward reads dy and x and writes dx
    assert opmath.element_pass_bytes("layernorm", "fwd", 100, 4) == 800
    assert opmath.element_pass_bytes("layernorm", "bwd_data", 100, 4) == 1200
    # an embedding of 10 tokens of 4 features from a 50-row table: ids + rows read, output written;
    # its gradient zeroes the 50 x 4 table, reads dY and adds each row into it
    assert opmath.embedding_bytes(10, 4, 50, "fwd", 2) == 10 * 8 + 2 * 10 * 4 * 2
    assert opmath.embedding_bytes(10, 4, 50, "bwd_weight", 2) == 50 * 4 * 2 + 10 * 8 + 3 * 10 * 4 * 2
    # cross-entropy over a 50257-word vocabulary, in float32 at any plan dtype
    assert opmath.cross_entropy_bytes(3, 50257, "fwd") == 2 * 3 * 50257 * 4
    assert opmath.cross_entropy_bytes(3, 50257, "bwd_data") == 4 * 3 * 50257 * 4
    # bf16 logits: cast to float32 first (read 2 + write 4 bytes each), dX cast back (read 4 + write 2)
    assert opmath.cross_entropy_bytes(3, 50257, "fwd", 2) == (2 * 4 + 2 + 4) * 3 * 50257
    assert opmath.cross_entropy_bytes(3, 50257, "bwd_data", 2) == (4 * 4 + 4 + 2) * 3 * 50257
    # at the logits' precision (no cast): the same passes at 2 bytes; fused: read once forward, read + write dX
    assert opmath.cross_entropy_bytes(3, 50257, "fwd", 2, "half") == 2 * 2 * 3 * 50257
    assert opmath.cross_entropy_bytes(3, 50257, "bwd_data", 2, "half") == 4 * 2 * 3 * 50257
    assert opmath.cross_entropy_bytes(3, 50257, "fwd", 2, "fused") == 2 * 3 * 50257
    assert opmath.cross_entropy_bytes(3, 50257, "bwd_data", 2, "fused") == 2 * 2 * 3 * 50257
    assert opmath.cross_entropy_bytes(3, 50257, "fwd", 4, "half") == opmath.cross_entropy_bytes(3, 50257, "fwd", 4)
