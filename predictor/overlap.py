"""The data-parallel gradient exchange overlapped with backward, under each framework's execution regime.

Four regimes (`Plan.framework`, `FRAMEWORKS`), each a rule for when which gradient bytes are reduced: ddp (25 MB
buckets in reverse layer order, each launched when backward has produced it), horovod (a cycle thread fusing
ready gradients up to a threshold), horovod-grouped (NVIDIA's MXNet: 16 groups of equal bytes) and no-overlap (one
all-reduce after backward, as ParaDL charges it). The buckets run one after another: end_k = max(launch_k,
end_{k-1}) + T(bytes_k), exposed = max(0, end_last - backward). On a GPU only eta of the overlapped time is hidden
(CostModel.overlap_efficiency). docs/method.md §8; docs/decisions/2026-12-01-framework-regimes.md,
2026-12-01-overlap-efficiency.md.
"""
from __future__ import annotations

import math
from itertools import accumulate
from typing import Callable, NamedTuple, Sequence

FRAMEWORKS = ("ddp", "horovod", "horovod-grouped", "no-overlap")


class Regime(NamedTuple):
    """How one framework schedules the gradient allreduce (module docstring)."""

    name: str
    fusion_bytes: float      # bucket / fusion-buffer size (inf = everything in one allreduce)
    cycle_s: float           # launch granularity (0 = as soon as ready)
    overlaps: bool           # False: nothing starts before backward ends
    groups: int = 0          # > 0: fuse at most total gradient bytes / groups (MXNET_HOROVOD_NUM_GROUPS)


def regime(framework: str, bucket_bytes: float = 25e6) -> Regime:
    """The Regime of a framework name (ddp takes the plan's bucket size)."""
    if framework == "ddp":
        return Regime("ddp", bucket_bytes, 0.0, True)
    if framework == "horovod":
        return Regime("horovod", 64e6, 5e-3, True)
    if framework == "horovod-grouped":
        return Regime("horovod-grouped", 64e6, 1e-4, True, groups=16)
    if framework == "no-overlap":
        return Regime("no-overlap", math.inf, 0.0, False)
    raise ValueError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")


def bucket_layout(grad_bytes: Sequence[float], bucket_bytes: float) -> list[tuple[int, float]]:
    """DDP buckets for per-layer gradient bytes in forward order: (ready position, bytes) per bucket,
    the position counting layers from the last one (0 = last layer), i.e. in backward order."""
    out = []
    pending = 0.0
    pos = -1
    for pos, g in enumerate(reversed(grad_bytes)):
        pending += g
        if pending >= bucket_bytes:
            out.append((pos, pending))
            pending = 0.0
    if pending > 0:
        out.append((pos, pending))
    return out


def ready_times(bwd_s: Sequence[float]) -> list[float]:
    """Backward clock after each layer, walking from the last layer (bwd_s in forward order)."""
    return list(accumulate(reversed(bwd_s)))


def launches(grad_bytes: Sequence[float], ready: Sequence[float], reg: Regime,
             layout: Sequence[tuple[int, float]] | None = None) -> list[tuple[float, float]]:
    """(launch time, bytes) of every allreduce the regime issues; grad_bytes in forward order, ready from
    ready_times (both over the same layers). layout: the DDP bucket_layout of grad_bytes when the caller keeps
    it (it does not depend on the backward times)."""
    if not ready:
        return []
    if not reg.overlaps:
        total = sum(grad_bytes)
        return [(ready[-1], total)] if total > 0 else []
    if reg.cycle_s <= 0:
        layout = bucket_layout(grad_bytes, reg.fusion_bytes) if layout is None else layout
        return [(ready[pos], size) for pos, size in layout]
    out: list[tuple[float, float]] = []
    pending, tick = 0.0, 0.0
    limit = min(reg.fusion_bytes, sum(grad_bytes) / reg.groups) if reg.groups else reg.fusion_bytes
    for pos, g in enumerate(reversed(grad_bytes)):
        if g <= 0:
            continue
        t = math.ceil(ready[pos] / reg.cycle_s - 1e-12) * reg.cycle_s
        if pending > 0 and (t > tick or pending + g > limit):
            out.append((tick, pending))
            pending = 0.0
        if pending == 0.0:
            tick = t
        pending += g
    if pending > 0:
        out.append((tick, pending))
    return out


def schedule(issued: Sequence[tuple[float, float]], total_bwd: float, allreduce_s: Callable[[float], float],
             efficiency: float = 1.0) -> tuple[float, float]:
    """(exposed_s, hidden_s) of allreduces issued at (launch time, bytes) behind a backward of total_bwd
    seconds, one after another on one stream; efficiency = the overlap efficiency eta (module docstring)."""
    comm_end = 0.0
    total = 0.0
    for launch, size in issued:
        c = allreduce_s(size)
        comm_end = max(comm_end, launch) + c
        total += c
    exposed = max(0.0, comm_end - total_bwd)
    hidden = max(0.0, total - exposed)
    slowdown = (1.0 - efficiency) * hidden
    return exposed + slowdown, hidden - slowdown


def overlap(layout: Sequence[tuple[int, float]], ready: Sequence[float],
            allreduce_s: Callable[[float], float]) -> tuple[float, float]:
    """(exposed_s, hidden_s) of a DDP bucket layout with perfect overlap (pipeline stages use it)."""
    return schedule([(ready[pos], size) for pos, size in layout], ready[-1] if ready else 0.0, allreduce_s)
