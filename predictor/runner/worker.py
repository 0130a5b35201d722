"""What each rank runs for `predictor validate`: every job of its world size, one after another."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from predictor.runner.build import build_replica, torch_dtype
from predictor.runner.measure import measure
from predictor.runner.nets import synthetic_batch
from predictor.runner.settings import autocast_forward, run_settings
from profiler.errors import UserError


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
        result.update(threads=torch.get_num_threads(), world=world, device=device, backend=dist.get_backend(),
                      pid_cpu_count=os.cpu_count())
        if cfg.strategy == "pipeline":
            result["stage_starts"] = list(replica.stage_starts)
        if rank == 0:
            emit(("run", index, result))
        del replica
