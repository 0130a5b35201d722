"""STREAM kernels (copy, scale, add, triad, dot) on CPU (torch) and on NVIDIA GPUs (CUDA C in stream.cu,
compiled at run time by cupy.RawModule).

Definitions and byte counting follow McCalpin's STREAM as BabelStream implements it
(UoB-HPC/BabelStream; docs/calibration.md "Sections"): copy c = a, scale b = s*c, add c = a + b,
triad a = b + s*c, dot sum(a*b); bytes moved = arrays touched * n * element size (copy/scale 2,
add/triad 3, dot 2), write-allocate traffic not counted. Arrays are float64, as in STREAM.

Imports nothing of paraoracle's own.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy
import torch

STREAM_OPS = ("copy", "scale", "add", "triad", "dot")
ARRAYS_TOUCHED = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "dot": 2}
ELEMENT_BYTES = 8  # float64
SCALAR = 0.4
CUDA_SOURCE = Path(__file__).with_name("stream.cu")


def stream_bytes(op: str, n: int, element_bytes: int = ELEMENT_BYTES) -> int:
    """Bytes one call of `op` moves over arrays of n elements, counted the STREAM way."""
    return ARRAYS_TOUCHED[op] * n * element_bytes


def stream_flops(op: str, n: int) -> int:
    """Floating-point operations of one call: scale/add 1 per element, triad/dot 2, copy 0."""
    return {"copy": 0, "scale": 1, "add": 1, "triad": 2, "dot": 2}[op] * n


class TorchStream:
    """The five STREAM kernels over three preallocated arrays of n float64s, as torch ops writing in place."""

    def __init__(self, n: int, device: str = "cpu"):
        self.n = n
        self.a = torch.full((n,), 1.0, dtype=torch.float64, device=device)
        self.b = torch.full((n,), 2.0, dtype=torch.float64, device=device)
        self.c = torch.zeros(n, dtype=torch.float64, device=device)

    def kernel(self, op: str) -> Callable[[], object]:
        a, b, c = self.a, self.b, self.c
        kernels = {
            "copy": lambda: c.copy_(a),
            "scale": lambda: torch.mul(c, SCALAR, out=b),
            "add": lambda: torch.add(a, b, out=c),
            "triad": lambda: torch.add(b, c, alpha=SCALAR, out=a),
            "dot": lambda: torch.dot(a, b),
        }
        return kernels[op]


class CupyStream:
    """The five STREAM kernels of stream.cu on the current CUDA device, launched with cupy on the legacy
    default stream (the stream torch's CUDA events record on, so profiler.timing can time them)."""

    BLOCK = 256  # threads per block; stream_dot's shared buffer holds up to 1024

    def __init__(self, n: int):
        import cupy  # only on GPU machines

        self.cupy = cupy
        self.n = n
        module = cupy.RawModule(code=CUDA_SOURCE.read_text())
        self.functions = {op: module.get_function(f"stream_{op}") for op in STREAM_OPS}
        self.a = cupy.full(n, 1.0, dtype=cupy.float64)
        self.b = cupy.full(n, 2.0, dtype=cupy.float64)
        self.c = cupy.zeros(n, dtype=cupy.float64)
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.grid = max(1, min(-(-n // self.BLOCK), sms * 64))
        self.dot_grid = max(1, min(-(-n // self.BLOCK), sms * 4))
        self.partial = cupy.zeros(self.dot_grid, dtype=cupy.float64)

    def kernel(self, op: str) -> Callable[[], object]:
        f, n = self.functions[op], numpy.int64(self.n)  # the kernels take `long long n`
        a, b, c, s = self.a, self.b, self.c, numpy.float64(SCALAR)
        grid, block = (self.grid,), (self.BLOCK,)
        args = {
            "copy": (a, c, n),
            "scale": (b, c, s, n),
            "add": (a, b, c, n),
            "triad": (a, b, c, s, n),
            "dot": (a, b, self.partial, n),
        }[op]
        if op == "dot":
            grid = (self.dot_grid,)
        return lambda: f(grid, block, args)

    def dot_result(self) -> float:
        """Sum of the partials the last stream_dot call left (for correctness checks)."""
        return float(self.partial.sum())

