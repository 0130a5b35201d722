"""The storage coefficients (Coefficients.storage, calibrate.storage_model): from `profiler calibrate --only storage`
samples (profiler.bench_storage), and the published profiles' figures.

From one node's samples: its cold read bandwidth (large files, every reader), its cold small-file rate (files per
second: opens, reads and closes of ImageNet-sized files), its page-cache re-read bandwidth. Each figure is the
median over the timed calls, with the slowest and fastest call as its interval. On a file system every node mounts
from shared servers (profiler.bench_storage.SHARED_FILESYSTEMS) the aggregate bandwidth and metadata rate all
nodes share cannot be measured from one node: they stay unknown (the predictor reports a range). On a local file
system the node's figures are also its node-local staging storage's, and nothing is shared.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from calibrate.coefficients import Estimate, StorageFit
from profiler.bench_storage import SHARED_FILESYSTEMS
from profiler.errors import UserError
from profiler.profile import Sample


def _rate(sample: Optional[Sample], amount: float) -> Optional[Estimate]:
    if sample is None:
        return None
    rates = amount / np.asarray(sample.times_s, float)
    return Estimate(value=float(np.median(rates)), low=float(rates.min()), high=float(rates.max()))


def fit_storage(samples: Sequence[Sample]) -> StorageFit:
    by_variant = {s.variant: s for s in samples}
    first = samples[0]
    for s in samples:
        for key in ("files", "file_bytes", "readers"):
            if not isinstance(s.params.get(key), int) or s.params[key] < 1:
                raise UserError(f"storage sample {s.variant!r} has no positive integer params.{key}")
    kind = str(first.params.get("filesystem", "unknown"))
    shared = kind in SHARED_FILESYSTEMS
    large_cold, large_warm = by_variant.get("large_cold"), by_variant.get("large_warm")
    small_cold = by_variant.get("small_cold")
    node_read = _rate(large_cold, large_cold.bytes_moved or 0.0) if large_cold else None
    where = first.extra.get("path", "?")
    dropped = all(s.extra.get("cache_dropped", True) for s in samples if s.variant.endswith("_cold"))
    return StorageFit(
        filesystem=kind, shared=shared, node_read_bytes_per_s=node_read,
        node_files_per_s=_rate(small_cold, float(small_cold.params["files"])) if small_cold else None,
        page_cache_bytes_per_s=_rate(large_warm, large_warm.bytes_moved or 0.0) if large_warm else None,
        local_read_bytes_per_s=None if shared else node_read, readers=int(first.params["readers"]),
        sources=[f"measured: {kind} file system under {where}, {first.params['readers']} readers "
                 f"(profiler.bench_storage), median of the timed calls, their extremes as the interval"
                 + ("" if dropped else "; cold reads could not drop the page cache (posix_fadvise unavailable)")
                 + ("; a shared file system: its aggregate bandwidth and metadata rate, shared by every node, "
                    "cannot be measured from one node and stay unknown" if shared else
                    "; a local file system: nothing shared, the node's figures are its staging storage's")])


#: published figures per reference profile file: what the sources give (capacities); every bandwidth unknown
_DGX_A100_H100_LOCAL = ("2 x 1.92 TB NVMe for the OS and 4 x 3.84 TB NVMe for data per DGX A100/H100 "
                        "(dilipnaik.substack.com 'Certified Storage for Nvidia DGX SuperPOD', third-party)")
PUBLISHED = {
    "a100-dgx-8gpu.published.yaml": (4 * 3.84e12, _DGX_A100_H100_LOCAL),
    "a100-80gb-dgx-8gpu.published.yaml": (4 * 3.84e12, _DGX_A100_H100_LOCAL),
    "a100-40gb-4hdr-8gpu.published.yaml": (4 * 3.84e12, _DGX_A100_H100_LOCAL),
    "h100-dgx-8gpu.published.yaml": (4 * 3.84e12, _DGX_A100_H100_LOCAL),
}


def published_storage(profile_file: str) -> StorageFit:
    """A published node's storage: its local data drives' capacity where a source gives it; the file system and
    every bandwidth and rate unknown (no published figure for these systems' shared storage was found), so the
    predictor reports the storage term as a range."""
    capacity, source = PUBLISHED.get(profile_file, (None, None))
    return StorageFit(filesystem="unknown", shared=None, local_capacity_bytes=capacity,
                      sources=[(f"{source}; " if source else "") + "shared file system, its bandwidth and metadata "
                               "rate, and node read bandwidth: unknown (no published figure found for this system)"])
