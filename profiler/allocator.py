"""Pin glibc's malloc to one regime, so CPU kernels are timed the same way in calibration and in training.

glibc returns freed memory at the top of the heap to the OS (trim) and serves large blocks by mmap, with thresholds
that move as the process allocates and frees; a kernel whose workspace or output the OS must then fault in afresh on
every call runs up to 2x slower, depending on what ran before it. With trimming off and blocks up to 32 MiB from the
heap (the regime jemalloc and tcmalloc give, which PyTorch's CPU performance guide recommends), the calibration and
the validation runs measure the same kernels at the same speed (docs/decisions/2026-11-29-malloc-regime.md).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc's largest dynamic threshold (64-bit)
NO_TRIM_BYTES = 2**31 - 1  # mallopt takes an int


def keep_freed_memory() -> str:
    """Set the regime for this process's later allocations; returns what was done, for the record."""
    if not sys.platform.startswith("linux"):
        return "unchanged (not Linux)"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "unchanged (no glibc mallopt)"
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1 or mallopt(M_TRIM_THRESHOLD, NO_TRIM_BYTES) != 1:
        return "unchanged (mallopt refused)"
    return f"glibc: no trimming, mmap above {MMAP_THRESHOLD_BYTES // 2**20} MiB"
