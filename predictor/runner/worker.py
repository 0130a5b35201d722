"""What each rank runs for `predictor validate`: every job of its world size, one after another."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from predictor.runner.build import build_replica, torch_dtype
from predictor.runner.measure import kernel_trace, measure
from predictor.runner.nets import synthetic_batch
from predictor.runner.settings import autocast_forward, run_settings
from profiler.errors import UserError


def traced(replica, x, y, device: str, step_s: float) -> dict:
    """{"kernel_breakdown_s": device seconds by kind of kernel, "kernel_top": the longest kernels} of one profiled
    step (predictor.kernel_breakdown), or {"kernel_breakdown_error": why} when the profiler fails: a diagnostic never
    costs the run its timing."""
    from predictor.kernel_breakdown import measured_breakdown, top_kernels

    try:
        events = kernel_trace(replica, x, y, device)
        return {"kernel_breakdown_s": measured_breakdown(events, step_s), "kernel_top": top_kernels(events)}
    except Exception as err:  # noqa: BLE001 - any profiler failure (CUPTI missing, an API change) is reported
        return {"kernel_breakdown_error": f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"}


def run_jobs(rank: int, world: int, device: str, emit, jobs, warmup: int, iterations: int) -> None:
    """jobs: [(index, RunConfig, ModelGraph)]. Rank 0 emits ("run", index, measured) or
    ("skipped", index, reason) per job. A configuration the runner cannot build (divisibility, unsupported
    layer) raises the same UserError on every rank, so all ranks skip it together."""
    for index, cfg, graph in jobs:
        with run_settings(cfg):  # TF32, cuDNN's search: this run's, put back after it
            try:
                replica = build_replica(cfg, graph, device)
                x, y = synthetic_batch(graph, cfg.batch, seed=index, dtype=torch_dtype(cfg.dtype), device=device)
                x, y = replica.local_batch(x, y)
            except UserError as err:
                if rank == 0:
                    emit(("skipped", index, str(err)))
                continue
            autocast_forward(replica, cfg.amp, device)
            result = measure(replica, x, y, device=device, warmup=warmup, iterations=iterations)
            if world == 1 and device.startswith("cuda"):
                result.update(traced(replica, x, y, device, result["measured_median_s"]))
        result.update(threads=torch.get_num_threads(), world=world, device=device, backend=dist.get_backend(),
                      pid_cpu_count=os.cpu_count())
        if cfg.strategy == "pipeline":
            result["stage_starts"] = list(replica.stage_starts)
        if rank == 0:
            emit(("run", index, result))
        del replica
