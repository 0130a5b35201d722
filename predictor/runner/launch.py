"""Start the ranks of a validation job: self-spawned local ranks (gloo on CPU, NCCL on GPU), or the ranks
torchrun/srun already started (detected from their environment variables).

Self-spawned ranks report back through a queue: `spawn_ranks` yields every message the ranks `emit`, as it
arrives, so the caller can write each measured run at once.
"""
from __future__ import annotations

import os
import queue as queue_module
import socket
from datetime import timedelta
from typing import Callable, Iterator

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from profiler.allocator import keep_freed_memory
from profiler.errors import UserError


def external_launch() -> tuple[int, int, int] | None:
    """(rank, world, local_rank) when started by torchrun (RANK/WORLD_SIZE) or srun (SLURM_PROCID/NTASKS)."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "MASTER_ADDR" in env:
        return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", 0))
    return None


def device_for(local_rank: int) -> str:
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def init_process_group(rank: int, world: int, threads: int) -> str:
    """Initialise torch.distributed for this rank (env:// rendezvous) and return its device. The rank's
    malloc runs in the regime the calibration measured kernels in (profiler/allocator.py)."""
    keep_freed_memory()
    torch.set_num_threads(threads)
    device = device_for(int(os.environ.get("LOCAL_RANK", rank)))
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(minutes=5),
                            **({"device_id": torch.device(device)} if backend == "nccl" else {}))
    return device


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: int, port: int, threads: int, messages, target: Callable, args: tuple) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "LOCAL_RANK": str(rank)})
    try:
        device = init_process_group(rank, world, threads)
        target(rank, world, device, messages.put, *args)
        dist.barrier()
        dist.destroy_process_group()
        messages.put(("done", rank, None))
    except UserError as err:
        messages.put(("user_error", rank, str(err)))
    except BaseException as err:  # a bug: send the traceback to the parent, then fail
        import traceback

        messages.put(("crash", rank, traceback.format_exc()))
        raise SystemExit(1) from err


def spawn_ranks(world: int, target: Callable, args: tuple = (), threads: int = 1) -> Iterator[object]:
    """Run target(rank, world, device, emit, *args) on `world` fresh local processes; yield what they emit.

    A UserError in any rank is re-raised here (one line); a crash raises RuntimeError with its traceback."""
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, threads, messages, target, args), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    done = 0
    finished = False
    try:
        while done < world:
            try:
                message = messages.get(timeout=1.0)
            except queue_module.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"rank process exited with code {dead[0].exitcode} without reporting")
                continue
            if isinstance(message, tuple) and len(message) == 3 and message[0] in ("done", "user_error", "crash"):
                kind, rank, text = message
                if kind == "user_error":
                    raise UserError(text)
                if kind == "crash":
                    raise RuntimeError(f"rank {rank} crashed:\n{text}")
                done += 1
                continue
            yield message
        finished = True
    finally:
        for p in procs:  # on an error or Ctrl-C the ranks are stopped at once
            p.join(timeout=10 if finished else 0)
            if p.is_alive():
                p.terminate()
                p.join()
