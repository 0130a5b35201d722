"""Measure one configuration: timed training iterations after warm-up, per-phase breakdown, peak memory.

Timing: every iteration starts after a barrier; each rank times forward, backward, gradient sync and
optimizer update with perf_counter (CUDA-synchronised on GPU); the iteration time is the slowest rank's
(max over ranks per iteration). We report the median and IQR over the timed iterations, and two signs of
a busy machine: the 1-minute load average and each rank's CPU seconds per wall second over the timed loop
(`cpu_busy_fraction`, the smallest over ranks). `comm_s` is the
time spent inside the runner's own collectives and p2p (comm.CommClock: halos, gathers, all-reduces,
pipeline send/recv, gradient sync of model-parallel runs); DDP's bucketed all-reduce runs inside backward
and is not separated (comm_s excludes it; `ddp` rows say so).

Peak memory per rank, one extra untimed iteration:
- GPU: torch.cuda.max_memory_allocated (absolute: weights, gradients, activations, workspaces).
- CPU: peak resident set size during the iteration, sampled every ~0.5 ms from /proc/self/statm by a
  thread, minus the RSS just before it, plus the bytes of parameters (kept across iterations). Workers
  run with glibc's mmap threshold at 64 KiB (launch.py), so freed tensors leave the RSS and it follows
  the live tensors; short peaks under 0.5 ms can be missed.
"""
from __future__ import annotations

import os
import statistics
import threading
import time

import torch
import torch.distributed as dist

from predictor.runner.comm import CommClock
from predictor.runner.replica import Replica

PHASES = ("iteration_s", "forward_s", "backward_s", "grad_sync_s", "update_s", "comm_s")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


class _RssPeak:
    """Background sampler of this process's resident set size."""

    def __init__(self, period_s: float = 5e-4):
        self.page_bytes = os.sysconf("SC_PAGE_SIZE")
        self.period_s = period_s
        self.peak_bytes = self.baseline_bytes = self.rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss_bytes(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page_bytes

    def _run(self):
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self.rss_bytes())
            time.sleep(self.period_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self.rss_bytes())


def _step(replica: Replica, optimizer, x, y, device: str) -> list[float]:
    """One training iteration; returns the PHASES times of this rank."""
    CommClock.reset()
    _sync(device)
    t0 = time.perf_counter()
    loss = replica.forward(x, y)
    _sync(device)
    t1 = time.perf_counter()
    replica.backward(loss)
    _sync(device)
    t2 = time.perf_counter()
    replica.sync_grads()
    _sync(device)
    t3 = time.perf_counter()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _sync(device)
    t4 = time.perf_counter()
    return [t4 - t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3, CommClock.seconds]


def measure(replica: Replica, x, y, *, device: str, warmup: int, iterations: int, group=None) -> dict:
    """Time `iterations` training steps after `warmup` on every rank of `group` (all ranks of the run call
    this together); returns the summary on every rank (timings are max over ranks)."""
    optimizer = torch.optim.SGD(replica.parameters(), lr=1e-3)
    distributed = dist.is_initialized() and (group is not None or dist.get_world_size() > 1)
    for _ in range(warmup):
        _step(replica, optimizer, x, y, device)
    rows = []
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(iterations):
        if distributed:
            dist.barrier(group)
        rows.append(_step(replica, optimizer, x, y, device))
    # CPU seconds this process got per wall second of the timed loop: well under the thread count means
    # the rank waited (communication, or other processes holding the cores)
    busy = torch.tensor([(time.process_time() - cpu_start) / (time.perf_counter() - wall_start)], dtype=torch.float64)
    table = torch.tensor(rows, dtype=torch.float64)
    if distributed:
        dist.all_reduce(table, op=dist.ReduceOp.MAX, group=group)
        dist.all_reduce(busy, op=dist.ReduceOp.MIN, group=group)
    columns = {name: table[:, i].tolist() for i, name in enumerate(PHASES)}
    q1, median, q3 = _quantiles(columns["iteration_s"])
    result = {
        "measured_time_s": median,
        "measured_iqr_s": q3 - q1,
        "measured_min_s": min(columns["iteration_s"]),
        "iterations": iterations,
        "warmup": warmup,
        "iteration_times_s": columns["iteration_s"],
        "breakdown_s": {name: statistics.median(columns[name]) for name in PHASES[1:]},
        "cpu_busy_fraction": float(busy[0]),  # min over ranks
        "loadavg_1m": os.getloadavg()[0],
    }
    result.update(_peak_memory(replica, optimizer, x, y, device, group if distributed else None, distributed))
    return result


def _peak_memory(replica, optimizer, x, y, device, group, distributed) -> dict:
    param_bytes = sum(p.numel() * p.element_size() for p in replica.parameters())
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        _step(replica, optimizer, x, y, device)
        peak = float(torch.cuda.max_memory_allocated())
        method = "torch.cuda.max_memory_allocated"
    else:
        with _RssPeak() as rss:
            _step(replica, optimizer, x, y, device)
        peak = float(param_bytes + rss.peak_bytes - rss.baseline_bytes)
        method = "param bytes + sampled peak RSS increase over one iteration"
    values = torch.tensor([peak, float(param_bytes)], dtype=torch.float64)
    per_rank = [values.clone() for _ in range(dist.get_world_size(group) if distributed else 1)]
    if distributed:
        dist.all_gather(per_rank, values, group=group)
    return {
        "peak_memory_bytes": max(float(v[0]) for v in per_rank),
        "peak_memory_per_rank_bytes": [float(v[0]) for v in per_rank],
        "param_bytes_per_rank": [float(v[1]) for v in per_rank],
        "peak_memory_method": method,
    }
