"""The data-parallel gradient exchange overlapped with backward, under each framework's execution regime.

Three regimes (`Plan.framework`, `FRAMEWORKS`), each a rule for when which gradient bytes are reduced:

- **ddp** (PyTorch DistributedDataParallel, docs "DDP design"): gradients go into buckets of ~25 MB
  (`bucket_cap_mb`) in reverse layer order; a bucket's allreduce is launched as soon as backward has produced
  all its gradients; buckets go out one after another on one communication stream.
- **horovod** (Horovod "Tensor Fusion", docs/tensor-fusion.rst): a background thread wakes every cycle
  (HOROVOD_CYCLE_TIME, 5 ms before v0.21, 1 ms since) and fuses every gradient that is ready into
  allreduces of up to HOROVOD_FUSION_THRESHOLD bytes (64 MB before v0.21, 128 MB since). We use the
  defaults of the releases the published runs used (5 ms, 64 MB).
- **horovod-grouped** (NVIDIA's MXNet with Horovod, as DeepLearningExamples' MxNet/Classification/RN50v1.5/runner
  sets it: MXNET_HOROVOD_NUM_GROUPS=16, HOROVOD_CYCLE_TIME=0.1 ms, HOROVOD_FUSION_THRESHOLD=64 MB): the gradients
  in 16 groups of equal bytes, each handed to Horovod when backward has produced it, fused per 0.1 ms cycle.
- **no-overlap** (ChainerMN, plain allreduce after `loss.backward()`): one fused allreduce of all
  gradients after backward has finished.

With launch_k the time bucket k may start and T(bytes) the allreduce time over the data-parallel group:

    end_k   = max(launch_k, end_{k-1}) + T(bytes_k)
    exposed = max(0, end_last - backward_total),  hidden = sum_k T(bytes_k) - exposed

ddp: launch_k = ready_k (backward clock when the earliest layer of bucket k is done);
horovod: launch_k = the first cycle tick at or after the layers' ready time, k fusing what is ready then (at most
the fusion threshold; horovod-grouped: at most a group, total / groups);
no-overlap: one bucket launched at backward_total.

Overlap is not free on a GPU: NCCL kernels run on the same SMs and memory as backward. A profile may give
an overlap efficiency eta in (0, 1] (CostModel.overlap_efficiency): the share of the overlapped time that is
really hidden; the rest, (1 - eta) * hidden, is added to the exposed time. ParaDL charges the whole
allreduce after backward, i.e. the no-overlap regime.
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
