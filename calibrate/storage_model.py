"""The shared-storage read time of one training step (docs/method.md §19a), from a profile's StorageFit.

Every node of a job reads its samples from the same file system; per step the storage term is the slowest of the
shared bandwidth and metadata rate, the node's bandwidth and file rate and the page cache (their reads overlap),
with the page cache serving h = min(1, cache / dataset) of the reads in steady state, or, staged on node-local
storage, the local reads and a one-off copy. A figure the profile does not know (None) is left out of the
prediction and of the "low" bound and taken at UNKNOWN_FLOOR for the "high" one, so the term is a range
(docs/decisions/2026-12-06-shared-storage.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

#: share of a node's memory the page cache may keep of the dataset (assumed: the rest holds the job's own pages)
PAGE_CACHE_SHARE = 0.5
#: the figures an unknown storage is taken at for the interval's slow end (assumed: one NFS server behind 10 GbE,
#: 1.25 GB/s shared and per node, 5,000 file opens per second; a SATA SSD for an unknown local disk, 0.5 GB/s)
UNKNOWN_FLOOR = {"aggregate_read_bytes_per_s": 1.25e9, "metadata_ops_per_s": 5.0e3, "node_read_bytes_per_s": 1.25e9,
                 "node_files_per_s": 5.0e3, "local_read_bytes_per_s": 0.5e9}


@dataclass(frozen=True)
class StorageDemand:
    """What one step reads: samples per node, nodes, bytes and files per sample, the dataset's bytes, staged."""

    samples_per_node: float
    nodes: int
    sample_bytes: float
    files_per_sample: float
    dataset_bytes: float
    staged: bool = False


@dataclass
class StorageTime:
    """A step's storage read time at one bound, the resource that binds, the terms, and what was unknown."""

    seconds: float = 0.0
    binding: str = ""
    terms: dict = field(default_factory=dict)
    unknown: list = field(default_factory=list)
    cache_hit: float = 0.0
    staging_s: float = 0.0  # one-off copy of the node's share to local storage (staged only)
    high_s: Optional[float] = None  # with unknown figures: the time at their floors (the range's slow end)


def _figure(fit, name: str, bound: Optional[str], unknown: list) -> Optional[float]:
    """A bandwidth/rate at the bound's slow ("high" time) or fast end; the floor or None when unknown."""
    estimate = getattr(fit, name, None) if fit is not None else None
    if estimate is None:
        unknown.append(name)
        return UNKNOWN_FLOOR[name] if bound == "high" else None
    # a rate: the slow end of times ("high") is its low end
    return {None: estimate.value, "low": estimate.high, "high": estimate.low}[bound]


def storage_time(fit, host_memory_bytes: Optional[float], demand: StorageDemand,
                 bound: Optional[str] = None) -> StorageTime:
    """The module docstring's storage time of one step (0 when nothing is read)."""
    out = StorageTime()
    if demand.samples_per_node <= 0 or demand.sample_bytes <= 0:
        return out
    cache = PAGE_CACHE_SHARE * host_memory_bytes if host_memory_bytes else 0.0
    hit = min(1.0, cache / demand.dataset_bytes) if demand.dataset_bytes > 0 else 0.0
    out.cache_hit = hit
    miss = 1.0 - hit
    node_bytes = demand.samples_per_node * demand.sample_bytes
    node_files = demand.samples_per_node * demand.files_per_sample
    unknown: list[str] = []
    terms: dict[str, float] = {}

    def add(label: str, amount: float, rate: Optional[float]) -> None:
        if rate and amount > 0:
            terms[label] = amount / rate

    if demand.staged:
        add("node-local storage", node_bytes * miss, _figure(fit, "local_read_bytes_per_s", bound, unknown))
        node_rate = _figure(fit, "node_read_bytes_per_s", None, [])
        shared_rate = _figure(fit, "aggregate_read_bytes_per_s", None, []) if getattr(fit, "shared", None) else None
        copy_rate = min(r for r in (node_rate, shared_rate / demand.nodes if shared_rate else None,
                                    UNKNOWN_FLOOR["node_read_bytes_per_s"]) if r)
        capacity = getattr(fit, "local_capacity_bytes", None) if fit is not None else None
        share = demand.dataset_bytes if not capacity or capacity >= demand.dataset_bytes else \
            demand.dataset_bytes / demand.nodes
        out.staging_s = share / copy_rate
    else:
        shared = getattr(fit, "shared", None) if fit is not None else None
        if shared is not False:  # one file system every node reads (or not known to be local)
            job = demand.nodes
            add("shared file system bandwidth", job * node_bytes * miss,
                _figure(fit, "aggregate_read_bytes_per_s", bound, unknown))
            add("shared file system metadata", job * node_files * miss, _figure(fit, "metadata_ops_per_s", bound, unknown))
        add("node read bandwidth", node_bytes * miss, _figure(fit, "node_read_bytes_per_s", bound, unknown))
        add("node file opens", node_files * miss, _figure(fit, "node_files_per_s", bound, unknown))
    page = getattr(fit, "page_cache_bytes_per_s", None) if fit is not None else None
    if page is not None:
        add("page cache", node_bytes * hit, {None: page.value, "low": page.high, "high": page.low}[bound])
    out.terms, out.unknown = terms, unknown
    if terms:
        out.binding, out.seconds = max(terms.items(), key=lambda kv: kv[1])
    return out
