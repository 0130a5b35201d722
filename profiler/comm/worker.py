"""What every rank runs: join the job, agree on groups, sweep (group, operation, size) points in the same
order on every rank, and report to the supervising process (rank 0's results become Samples there).

Reports are (kind, rank, payload) tuples put on a queue, kind one of "settings" (dict), "point" (label),
"sample" (dict), "error" (message), "done" (None). Only rank 0 reports settings, points and samples; any
rank may report an error.
"""
from __future__ import annotations

import datetime
import os
import signal
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.distributed as dist

from kernels.collectives import OPERATIONS
from profiler.comm import faults, layout
from profiler.comm.factors import algbw_bytes_per_s, busbw_bytes_per_s, busbw_factor
from profiler.comm.harness import (FULL, INTERLEAVE_S, QUICK, SweepFailure, measure_interleaved, measure_point, sweep_chunks,
                                   sweep_rounds)
from profiler.errors import UserError
from profiler.threads import rank_share_threads

ELEMENT_DTYPE = torch.float32
ELEMENT_BYTES = torch.tensor([], dtype=ELEMENT_DTYPE).element_size()
Report = Callable[[str, object], None]


@dataclass(frozen=True)
class CommConfig:
    """Everything a rank needs to take part; identical on every rank (all derive it from the same flags)."""

    device: str  # "cpu" or "cuda"
    backend: str  # "gloo" or "nccl"
    ops: tuple[str, ...]
    sizes_bytes: tuple[int, ...]  # requested S, doubling
    quick: bool
    timeout_s: float  # per collective
    startup_timeout_s: float  # joining the job (rank 0 may run other benchmarks first under a launcher)
    launcher: str  # "spawn", "torchrun" or "slurm"
    master_addr: str
    master_port: int
    world_size: int


def _watch_parent() -> None:
    """A spawned rank exits as soon as the process that started it is gone: no orphans."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _join(config: CommConfig, rank: int, local_rank: int) -> str:
    """init_process_group; returns the device string this rank uses."""
    device = "cpu"
    if config.device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise UserError(f"rank {rank}: local rank {local_rank} has no GPU (this node has {torch.cuda.device_count()})")
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    startup = datetime.timedelta(seconds=config.startup_timeout_s)
    where = f"{config.master_addr}:{config.master_port}"
    try:
        if config.launcher == "torchrun":  # torchrun's agent already holds the store at MASTER_ADDR:MASTER_PORT
            dist.init_process_group(config.backend, init_method="env://", timeout=startup)
        else:
            store = dist.TCPStore(config.master_addr, config.master_port, config.world_size, is_master=rank == 0,
                                  timeout=datetime.timedelta(seconds=config.timeout_s))
            store.set_timeout(startup)
            dist.init_process_group(config.backend, store=store, rank=rank, world_size=config.world_size, timeout=startup)
    except Exception as err:  # noqa: BLE001 - every start-up failure becomes one line naming the master
        raise UserError(f"rank {rank}: cannot join the job at master {where} ({faults.short_cause(err)})") from None
    return device


def _points(config: CommConfig, groups: list[layout.Group]):
    """(group, op, [(S, requested S), ...]) in one fixed order; sizes that round to an S already seen are
    skipped."""
    for group in groups:
        for op in config.ops:
            kernel = OPERATIONS[op]
            if group.size < kernel.min_group_size or (kernel.max_group_size and group.size > kernel.max_group_size):
                continue
            sizes = {}
            for requested in config.sizes_bytes:
                sizes.setdefault(kernel.message_bytes(requested, group.size, ELEMENT_BYTES), requested)
            yield group, op, list(sizes.items())


def _sample(op, size, requested, group, variant, values, how, config) -> dict:
    n = group.size
    median = statistics.median(values)
    return {
        "benchmark": op, "variant": variant, "times_s": values,
        "params": {"size_bytes": size, "requested_size_bytes": requested,
                   "count": size // ELEMENT_BYTES, "group": group.describe()},
        "device": config.device, "dtype": "float32", "threads": torch.get_num_threads(), "bytes_moved": float(size),
        "extra": {"algbw_bytes_per_s": algbw_bytes_per_s(size, median),
                  "busbw_bytes_per_s": busbw_bytes_per_s(op, size, median, n),
                  "busbw_factor": busbw_factor(op, n), "backend": config.backend, "timing": how},
    }


def _measure_op(op, sizes, group, handle, rank, device, budget, fault, config, report, step_done) -> None:
    """One operation on one group: the latency and throughput regimes size after size, then the interleaved
    regime round-robin over the sizes (profiler.comm.harness), in chunks that bound the buffers held.
    step_done() is called after every size and every sweep (_steps of them)."""
    current_size = sizes[0][0]  # the size being measured, for the failure message
    most_rounds = budget.rounds(device)
    try:
        for chunk in sweep_chunks([size for size, _ in sizes]):
            calls, estimates_s = [], []
            for size, requested in (sizes[i] for i in chunk):
                current_size = size
                report("point", f"{op} at {size} B on {group.label()}")
                faults.maybe_inject(fault, rank, op, size)
                calls.append(OPERATIONS[op].setup(size, handle, list(group.ranks), rank, device, ELEMENT_DTYPE))
                times = measure_point(calls[-1], handle, device, budget)
                estimates_s.append(times.warmup_estimate_s)
                if rank == 0:
                    for variant, values, how in (
                            ("latency", times.latency_s, "barrier, one op, max over ranks per iteration"),
                            ("throughput", times.throughput_s,
                             f"{times.ops_per_sample} back-to-back ops then one sync, per op, max over ranks")):
                        report("sample", _sample(op, size, requested, group, variant, values, how, config))
                step_done()
            # a sweep reports nothing until it ends: keep it within half the per-collective timeout, which bounds
            # both the barrier that ranks outside the group wait at and the supervisor's no-progress watchdog
            # (120 rounds of a 256 MiB gloo allreduce ran past the watchdog's 40 s on a loaded machine)
            rounds = sweep_rounds(estimates_s, most_rounds, config.timeout_s / 2)
            report("point", f"{op} interleaved, {len(chunk)} sizes round-robin on {group.label()}")
            try:
                per_size = measure_interleaved(calls, handle, device, rounds, target_rel_sem=budget.target_rel_sem,
                                               min_rounds=budget.min_rounds)
            except SweepFailure as failure:
                current_size = sizes[chunk[failure.index]][0]
                raise failure.__cause__ from None
            del calls
            adaptive = (f" (a size left after >= {budget.min_rounds} rounds once its mean's relative standard "
                        f"error was <= {budget.target_rel_sem:g})" if budget.target_rel_sem is not None else "")
            if rank == 0:
                for (size, requested), values in zip((sizes[i] for i in chunk), per_size):
                    how = (f"one op after {INTERLEAVE_S * 1e3:g} ms of compute, max over ranks per iteration; "
                           f"{len(values)} of up to {rounds} rounds round-robin over {len(chunk)} sizes{adaptive}")
                    report("sample", _sample(op, size, requested, group, "interleaved", values, how, config))
            step_done()
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - backend errors (peer gone, timeout) name the point
        raise faults.CommFailure(op, current_size, group.label(), faults.short_cause(err)) from None


def _steps(sizes) -> int:
    """How many times _measure_op calls step_done for these sizes."""
    return len(sizes) + len(sweep_chunks([size for size, _ in sizes]))


def run_rank(config: CommConfig, rank: int, local_rank: int, report: Optional[Report]) -> None:
    """The whole sweep on one rank. Raises UserError (CommFailure for a failed point)."""
    report = report or (lambda kind, payload: None)
    fault = faults.fault_from_env()
    device = _join(config, rank, local_rank)
    hosts = [None] * config.world_size
    dist.all_gather_object(hosts, faults.host_name(rank))
    groups = layout.plan_groups(hosts)
    per_op = datetime.timedelta(seconds=config.timeout_s)
    handles = {g.ranks: dist.new_group(list(g.ranks), timeout=per_op) for g in groups}
    everyone = dist.new_group(list(range(config.world_size)), timeout=per_op)
    budget = QUICK if config.quick else FULL
    report("settings", {
        "backend": config.backend, "launcher": config.launcher, "world_size": config.world_size,
        "hosts": sorted(set(hosts)), "nodes": len(set(hosts)), "ranks_per_host": {h: hosts.count(h) for h in set(hosts)},
        "groups": [g.describe() for g in groups], "operations": list(config.ops),
        "size_range_bytes": [config.sizes_bytes[0], config.sizes_bytes[-1]], "regimes": ["latency", "throughput", "interleaved"],
        "timeout_s": config.timeout_s, "dtype": "float32", "torch": torch.__version__,
    })
    for group, op, sizes in _points(config, groups):
        def step_done():  # ranks outside the group wait here, a step at a time, under the same timeout
            if group.size < config.world_size:
                dist.barrier(group=everyone)

        if rank in group.ranks:
            _measure_op(op, sizes, group, handles[group.ranks], rank, device, budget, fault, config, report, step_done)
            continue
        try:
            for _ in range(_steps(sizes)):
                step_done()
        except Exception as err:  # noqa: BLE001 - a member of the group failed
            raise faults.CommFailure(op, sizes[-1][0], group.label(), faults.short_cause(err)) from None
    dist.destroy_process_group()
    report("done", None)


def spawned_rank(rank: int, config: CommConfig, queue, local_rank: Optional[int] = None) -> None:
    """Entry point of a rank process started by the supervisor (spawn mode, or rank 0 under a launcher)."""
    _watch_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the supervisor ends us
    local_rank = rank if local_rank is None else local_rank
    if config.launcher == "spawn" and config.device == "cpu":  # every rank on this host: share its cores
        torch.set_num_threads(rank_share_threads(config.world_size))

    def report(kind, payload):
        queue.put((kind, rank, payload))

    try:
        run_rank(config, rank, local_rank, report)
    except UserError as err:
        report("error", str(err))
        queue.close()
        queue.join_thread()
        os._exit(1)  # skip destroy_process_group: it can hang on a broken group
