"""Memory benchmarks: STREAM copy/scale/add/triad/dot over array sizes from cache-resident to well beyond
the last-level cache (CPU: torch in kernels/stream.py; GPU: the CUDA C kernels of kernels/stream.cu via
cupy, or torch ops on the device where cupy cannot compile them, recorded in each sample's `extra`), and
on GPU host<->device copies (pinned and pageable, both directions, a size sweep).

Bytes are counted the STREAM way (McCalpin's STREAM, as BabelStream counts them): copy/scale 2 arrays,
add/triad 3, dot 2, float64 elements, no write-allocate traffic. A host<->device copy of S bytes moves S.
"""
from __future__ import annotations

import mmap
import os
from typing import Optional

import torch

from kernels.stream import STREAM_OPS, CupyStream, TorchStream, stream_bytes, stream_flops
from profiler import caches
from profiler.cases import GRID_ENV, BenchCase
from profiler.errors import UserError

DEFAULT_GPU_L2_BYTES = 60 * 2**20  # H100/H200 L2 is 50-60 MB
MIN_LARGEST_ARRAY_BYTES = 64 * 2**20
HOST_DEVICE_VARIANTS = ("h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable")


def last_level_cache_bytes(device: str) -> int:
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return int(getattr(props, "L2_cache_size", 0) or DEFAULT_GPU_L2_BYTES)
    return caches.cpu_last_level_cache_bytes()


def stream_sizes(llc_bytes: int, quick: bool, element_bytes: int = 8) -> list[int]:
    """Array lengths (elements) from 32 KiB per array to at least 4x the last-level cache per array
    (so the three arrays are >= 12x LLC; full: 8x), in steps of 2x, so that cross-validation need not bridge the
    cache-to-DRAM drop from one size to the next (docs/decisions/2026-11-29-break-point-penalty.md)."""
    largest_bytes = max(4 * llc_bytes, MIN_LARGEST_ARRAY_BYTES) * (1 if quick else 2)
    sizes, n = [], 32 * 2**10 // element_bytes
    while n * element_bytes < largest_bytes:
        sizes.append(n)
        n *= 2
    sizes.append(n)
    return sizes


def gpu_stream_kernels() -> tuple[str, Optional[str]]:
    """("cuda_c", None) when cupy can compile and launch kernels/stream.cu here; otherwise ("torch", why),
    and the GPU STREAM points run as torch ops on the device instead."""
    try:
        CupyStream(1024).kernel("triad")()
    except Exception as err:  # cupy missing, NVRTC missing or failing, driver mismatch: all mean "no CUDA C"
        return "torch", f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:160]}"
    return "cuda_c", None


def stream_cases(device: str, quick: bool) -> list[BenchCase]:
    """Every STREAM point; arrays are (re)allocated per size and shared by that size's five kernels."""
    if os.environ.get(GRID_ENV) == "tiny":
        sizes = [2**10, 2**14]
    else:
        sizes = stream_sizes(last_level_cache_bytes(device), quick)
    kernels, fallback_reason = gpu_stream_kernels() if device.startswith("cuda") else ("torch", None)
    tags = {"kernel": kernels, **({"cuda_c_unavailable": fallback_reason} if fallback_reason else {})}
    cuda_c = kernels == "cuda_c"
    cases = []
    for n in sizes:
        arrays: dict = {}

        def build(op: str, n: int = n, arrays: dict = arrays):
            if "stream" not in arrays:  # first kernel of this size allocates; the last one frees
                arrays["stream"] = CupyStream(n) if cuda_c else TorchStream(n, device)
            stream = arrays["stream"]
            if op == STREAM_OPS[-1]:
                arrays.clear()
            return stream.kernel(op)

        for op in STREAM_OPS:
            cases.append(BenchCase("stream", op, {"n": n, "array_bytes": 8 * n}, "float64",
                                   stream_flops(op, n), stream_bytes(op, n),
                                   (lambda op=op, build=build: build(op)), dict(tags)))
    return cases


#: first-touch points: tensors this many times the allocator's mmap threshold (profiler.allocator)
FIRST_TOUCH_THRESHOLD_MULTIPLES = (1.5, 3.0)


def first_touch_cases(device: str) -> list[BenchCase]:
    """CPU: write a tensor above the mmap threshold into fresh pages (`fresh`: a private anonymous mapping, as glibc
    maps such a block, written and unmapped) and into one allocated once (`reused`); their difference per byte is
    what every tensor of that size costs a training step on top of its kernel (calibrate.backends.host). The mapping
    is made directly: a torch.empty of that size can be carved from a heap an earlier section grew (no trimming),
    and then touches no new page (48 MiB after the STREAM section: 1.9 ms fresh against 2.7 ms reused)."""
    if device.startswith("cuda"):
        return []  # the CUDA caching allocator keeps freed blocks: no first touch per step
    from profiler.allocator import MMAP_THRESHOLD_BYTES

    cases = []
    for multiple in FIRST_TOUCH_THRESHOLD_MULTIPLES if os.environ.get(GRID_ENV) != "tiny" else (1.5,):
        n = int(multiple * MMAP_THRESHOLD_BYTES) // 4
        params = {"bytes": 4 * n, "threshold_bytes": MMAP_THRESHOLD_BYTES}

        def fresh(n: int = n):
            def call():
                pages = mmap.mmap(-1, 4 * n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                tensor = torch.frombuffer(pages, dtype=torch.float32)
                tensor.fill_(1.0)
                del tensor  # the mapping cannot close while a tensor exports it
                pages.close()
            return call

        def reused(n: int = n):
            buffer = torch.empty(n, dtype=torch.float32)
            return lambda: buffer.fill_(1.0)

        for variant, build in (("fresh", fresh), ("reused", reused)):
            cases.append(BenchCase("alloc", variant, dict(params), "float32", None, 4 * n, build))
    return cases


def host_device_sizes(quick: bool) -> list[int]:
    """4 KiB to 256 MiB (quick: x4 steps to 64 MiB; full: x4 steps to 256 MiB and 1 GiB)."""
    top = 64 * 2**20 if quick else 2**30
    sizes, s = [], 4 * 2**10
    while s <= top:
        sizes.append(s)
        s *= 4
    return sizes


def host_device_cases(device: str, quick: bool) -> list[BenchCase]:
    """Copies between a host buffer (pinned or pageable) and device memory, timed on the device's stream."""
    if not device.startswith("cuda"):
        raise UserError("--only host_device: host<->device copies need --device cuda")
    sizes = [4096, 2**20] if os.environ.get(GRID_ENV) == "tiny" else host_device_sizes(quick)
    cases = []
    for size in sizes:
        for variant in HOST_DEVICE_VARIANTS:
            def build(variant=variant, size=size):
                host = torch.empty(size, dtype=torch.uint8, pin_memory=variant.endswith("pinned"))
                dev = torch.empty(size, dtype=torch.uint8, device=device)
                pinned = variant.endswith("pinned")
                if variant.startswith("h2d"):
                    return lambda: dev.copy_(host, non_blocking=pinned)
                return lambda: host.copy_(dev, non_blocking=pinned)

            cases.append(BenchCase("host_device", variant, {"size_bytes": size}, "uint8", None, size, build))
    return cases
