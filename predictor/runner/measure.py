"""Measure one configuration: timed training iterations after warm-up, per-phase breakdown, peak memory.

Every iteration starts after a barrier; each rank times forward, backward, gradient sync and update (CUDA-
synchronised on GPU); the iteration time is the slowest rank's, and the measured time the mean over the timed
iterations (median and IQR kept), with the load average and `cpu_busy_fraction` as signs of a busy machine.
`comm_s` is the time inside the runner's own collectives and p2p (DDP's all-reduce runs inside backward and is not
separated). Peak memory per rank from one extra untimed iteration: torch.cuda.max_memory_allocated on GPU; on CPU
parameter and optimizer-state bytes plus the peak of live tensor storages (LiveTensorBytes), not the RSS.
docs/validation.md ("Measured runs").
"""
from __future__ import annotations

import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

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


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of the tensor storages created while active and still alive (a dispatch-level tracker:
    sees every op's outputs below autograd, so custom autograd Functions and collectives are counted).
    Storages are held by weak reference; the dead ones are dropped before each op's outputs count."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current_bytes = 0
        self.peak_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            self.current_bytes -= self.live.pop(key)[1]
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.live:
                    self.live[key] = (StorageWeakRef(storage), storage.nbytes())
                    self.current_bytes += storage.nbytes()
        self.peak_bytes = max(self.peak_bytes, self.current_bytes)
        return out


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


def kernel_trace(replica: Replica, x, y, device: str) -> list[tuple[str, float]]:
    """(name, seconds) of what one more training step runs, under torch.profiler: each GPU kernel's device time on
    a GPU, each op's self CPU time on a CPU (predictor.kernel_breakdown sorts them by kind)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    gpu = device.startswith("cuda")
    optimizer = torch.optim.SGD(replica.parameters(), lr=1e-3)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])) as prof:
        _step(replica, optimizer, x, y, device)
    events = list(prof.events())
    if not gpu:
        return [(e.name, e.self_cpu_time_total / 1e6) for e in events]
    kernels = [(e.name, e.time_range.elapsed_us() / 1e6) for e in events
               if getattr(e, "device_type", None) == DeviceType.CUDA]
    if kernels:
        return kernels
    return [(k.name, k.duration / 1e6) for e in events for k in getattr(e, "kernels", [])]


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
        # the mean, since a training job's throughput is steps / total time: on gloo a step's time is
        # bimodal (a collective pays a 1-3 ms wake-up in a third to a half of the steps), and the median of
        # 10 such steps jumped between the modes from one suite run to the next
        "measured_time_s": statistics.fmean(columns["iteration_s"]),
        "measured_median_s": median,
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
        state_bytes = sum(t.untyped_storage().nbytes() for state in optimizer.state.values()
                          for t in state.values() if isinstance(t, torch.Tensor))
        with LiveTensorBytes() as tracker:
            _step(replica, optimizer, x, y, device)
        peak = float(param_bytes + state_bytes + tracker.peak_bytes)
        method = "param + optimizer-state bytes + peak of tensor storages created during one iteration"
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
