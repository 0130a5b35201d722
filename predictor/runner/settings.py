"""The math settings of one validation run (RunConfig): TF32 matrix products and convolutions, the forward under
torch.autocast, and whether cuDNN searches its fastest algorithm per shape. Set for the run and put back after it,
so runs of one suite do not inherit each other's settings. docs/gpu.md ("The full-size check").
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def run_settings(cfg):
    """cfg.dtype "tf32": TF32 math in matrix products and convolutions; any other dtype runs them in full precision
    (PyTorch's own default leaves cuDNN's TF32 on: an "fp32" run would not be one). cfg.cudnn_benchmark:
    torch.backends.cudnn.benchmark."""
    backends = torch.backends
    saved = (backends.cudnn.benchmark, backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32)
    tf32 = cfg.dtype == "tf32"
    backends.cudnn.benchmark = bool(cfg.cudnn_benchmark)
    backends.cuda.matmul.allow_tf32 = tf32
    backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        backends.cudnn.benchmark, backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32 = saved


def autocast_forward(replica, amp: str, device: str) -> None:
    """Run the replica's forward and loss under torch.autocast in `amp` (PyTorch AMP: fp32 weights, the backward
    follows the forward's casts); a no-op without amp."""
    if not amp:
        return
    from predictor.runner.build import torch_dtype

    forward = replica.forward
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    dtype = torch_dtype(amp)

    def under_autocast(x, y):
        with torch.autocast(device_type=kind, dtype=dtype):
            return forward(x, y)

    replica.forward = under_autocast
