"""The collectives section of `profiler calibrate` (the contract with profiler/cmd_calibrate.py):

- add_arguments(parser): --ranks, --backend, --timeout-s, --startup-timeout-s, --master-addr,
  --master-port, --collectives, --max-message-bytes;
- is_worker_rank(): True in a torchrun/srun job on every rank but 0;
- run_worker(args) -> int: what those ranks do (take part, exit);
- preflight(args, device, quick): every flag check, nothing started (call before the first benchmark);
- measure(args, device, quick, sink) -> dict: on rank 0, runs the sweep (spawning --ranks local ranks, or
  joining the launcher's job), passes each Sample to sink as it arrives, returns settings to record.
  A failure raises UserError naming operation, size and group, after sink has had everything measured.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

from kernels.collectives import OPERATIONS
from profiler.comm import launch
from profiler.comm.supervise import supervise
from profiler.comm.worker import CommConfig, run_rank
from profiler.cliutil import float_in, int_in, port, rank_count
from profiler.errors import UserError

QUICK_CPU_MAX_BYTES = 16 * 2**20
#: a quick CPU sweep's sizes: four through gloo's latency-bound range, 4x steps from 16 KiB, where the
#: per-byte cost takes over (a full sweep doubles from MIN_BYTES). Each size of an interleaved sweep costs
#: about a hundred rounds of 1 ms of compute plus the op, and on a loopback pair a 4 B op and a 16 KiB one take
#: the same 1-2 ms: the latency segment needs a few points, not twelve.
QUICK_CPU_SIZES_BYTES = (64, 1024, 4096, 16384, 65536, 262144, 2**20, 4 * 2**20, QUICK_CPU_MAX_BYTES)
MAX_BYTES = 256 * 2**20
MIN_BYTES = 4


#: the largest message a sweep may be asked for (16 GiB: allgather outputs are p times larger)
LARGEST_MESSAGE_BYTES = 1 << 34
WEEK_S = 7 * 86400.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("collectives")
    g.add_argument("--ranks", type=rank_count, default=1,
                   help="spawn N local ranks for the collectives (default 1; ignored under torchrun/srun, which set the world)")
    g.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="torch.distributed backend (auto: nccl on cuda, gloo on cpu)")
    g.add_argument("--timeout-s", type=float_in(0.0, WEEK_S), default=30.0,
                   help="per-collective timeout; a dead or hung rank ends the run about this long after it fails")
    g.add_argument("--startup-timeout-s", type=float_in(0.0, WEEK_S), default=900.0,
                   help="how long ranks wait to join the job (rank 0 may run other benchmarks first)")
    g.add_argument("--master-addr", default=None,
                   help="rendezvous address (default 127.0.0.1 with --ranks; MASTER_ADDR or the first SLURM node under a launcher)")
    g.add_argument("--master-port", type=port, default=None,
                   help="rendezvous port (default: a free port with --ranks; MASTER_PORT, or 20000 + job id %% 20000 under srun)")
    g.add_argument("--collectives", default=",".join(OPERATIONS),
                   help=f"comma-separated operations to measure (default all: {','.join(OPERATIONS)})")
    g.add_argument("--max-message-bytes", type=int_in(MIN_BYTES, LARGEST_MESSAGE_BYTES), default=None,
                   help=f"largest message S: sizes double from {MIN_BYTES} B up to it (default {MAX_BYTES} B; with "
                        f"--quick on cpu and no --max-message-bytes, the quick sizes {QUICK_CPU_SIZES_BYTES[0]} B to "
                        f"{QUICK_CPU_MAX_BYTES} B)")


def is_worker_rank() -> bool:
    launcher = launch.launched_job()
    if launcher is None:
        return False
    rank = os.environ.get("RANK") if launcher == "torchrun" else os.environ.get("SLURM_PROCID")
    return rank not in (None, "0")


def _device_kind(device: str) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


def _ops(args) -> tuple[str, ...]:
    ops = tuple(o.strip() for o in str(args.collectives).split(",") if o.strip())
    unknown = [o for o in ops if o not in OPERATIONS]
    if unknown or not ops:
        raise UserError(f"--collectives {args.collectives}: unknown operation(s) {', '.join(unknown) or '(none given)'}; "
                        f"known: {', '.join(OPERATIONS)}")
    return ops


def _sizes(args, device_kind: str, quick: bool) -> tuple[int, ...]:
    largest = args.max_message_bytes or (QUICK_CPU_MAX_BYTES if quick and device_kind == "cpu" else MAX_BYTES)
    if largest < MIN_BYTES:
        raise UserError(f"--max-message-bytes {largest}: must be at least {MIN_BYTES}")
    if quick and device_kind == "cpu" and not args.max_message_bytes:
        return QUICK_CPU_SIZES_BYTES
    sizes, s = [], MIN_BYTES
    while s <= largest:
        sizes.append(s)
        s *= 2
    return tuple(sizes)


def _backend(args, device_kind: str) -> str:
    if args.backend == "auto":
        return "nccl" if device_kind == "cuda" else "gloo"
    if args.backend == "nccl" and device_kind != "cuda":
        raise UserError("--backend nccl needs a cuda device (use --backend gloo on cpu)")
    return args.backend


def _config(args, device: str, quick: bool, launcher: str, addr: str, port: int, world: int) -> CommConfig:
    kind = _device_kind(device)
    return CommConfig(device=kind, backend=_backend(args, kind), ops=_ops(args), sizes_bytes=_sizes(args, kind, quick),
                      quick=quick, timeout_s=args.timeout_s, startup_timeout_s=args.startup_timeout_s,
                      launcher=launcher, master_addr=addr, master_port=port, world_size=world)


def _args_device(args) -> str:
    device = getattr(args, "device", "cpu") or "cpu"
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def run_worker(args) -> int:
    """A non-zero rank under torchrun/srun: take part in every measurement, then exit (0, or 1 on failure)."""
    only = getattr(args, "only", None)
    if only is not None and "collectives" not in [item.strip() for item in str(only).split(",")]:
        return 0  # rank 0 runs no collectives, so there is nothing to take part in
    place = launch.job_place(args.master_addr, args.master_port)
    try:
        config = _config(args, _args_device(args), bool(getattr(args, "quick", False)), place.launcher,
                         place.master_addr, place.master_port, place.world_size)
        run_rank(config, place.rank, place.local_rank, None)
    except UserError as err:
        print(f"profiler calibrate: rank {place.rank}: error: {err}", file=sys.stderr)
        return 1
    return 0


def preflight(args, device: str, quick: bool) -> None:
    """Every check of the collectives flags a user can fail, without starting anything: call it before the
    first benchmark of any section so a bad flag costs nothing. measure() repeats it."""
    launcher = launch.launched_job()
    _config(args, device, quick, launcher or "spawn", args.master_addr or "127.0.0.1", args.master_port or 0, 2)
    if launcher is not None:
        place = launch.job_place(args.master_addr, args.master_port)
        if args.ranks > 1:
            raise UserError(f"--ranks {args.ranks}: not allowed under {launcher}, which already started {place.world_size} ranks")
        return
    if args.ranks < 2:
        return
    if _device_kind(device) == "cuda" and args.ranks > torch.cuda.device_count():
        raise UserError(f"--ranks {args.ranks}: this node has {torch.cuda.device_count()} GPU(s); one rank per GPU")
    launch.check_local_port(args.master_addr or "127.0.0.1", args.master_port)


def measure(args, device: str, quick: bool, sink) -> dict:
    """Rank 0: measure every collective, group and size; sink(Sample) as results arrive; return settings."""
    preflight(args, device, quick)
    launcher = launch.launched_job()
    if launcher is not None:
        place = launch.job_place(args.master_addr, args.master_port)
        if place.world_size < 2:
            return _skipped(f"the {launcher} job has 1 rank")
        config = _config(args, device, quick, launcher, place.master_addr, place.master_port, place.world_size)
        return supervise(config, [place.rank], sink, local_ranks=[place.local_rank])
    if args.ranks < 2:
        return _skipped("1 rank (use --ranks N, torchrun or srun for N >= 2 ranks)")
    addr = args.master_addr or "127.0.0.1"
    port = launch.check_local_port(addr, args.master_port)
    config = _config(args, device, quick, "spawn", addr, port, args.ranks)
    return supervise(config, list(range(args.ranks)), sink)


def _skipped(reason: str) -> dict:
    print(f"profiler calibrate: collectives skipped: {reason}", file=sys.stderr)
    return {"skipped": reason}
