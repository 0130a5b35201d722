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
