"""Where this process sits in a distributed job, and how to reach the job's master.

Three launchers: `spawn` (`--ranks N`: this process starts N local ranks itself), `torchrun` (env RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; PyTorch's torchrun docs) and `slurm` (srun: env
SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODELIST; the master is the first node of the list and
the port comes from --master-port or MASTER_PORT or the job id, so every task derives the same one).
"""
from __future__ import annotations

import errno
import os
import re
import socket
from dataclasses import dataclass
from typing import Mapping

from profiler.errors import UserError

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class JobPlace:
    launcher: str  # "spawn", "torchrun" or "slurm"
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int


def launched_job(env: Mapping[str, str] | None = None) -> str | None:
    """"torchrun" or "slurm" when an external launcher started this process as part of a job, else None."""
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        return "torchrun"
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and int(env.get("SLURM_NTASKS", "1")) > 1:
        return "slurm"
    return None


def first_slurm_host(nodelist: str) -> str:
    """First host of a SLURM node list: 'gpu[03-05,9],cpu1' -> 'gpu03'; 'a,b' -> 'a'."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match or not match.group(1):
        raise UserError(f"SLURM_NODELIST {nodelist!r}: cannot read the first host")
    prefix, ranges = match.group(1), match.group(2)
    if ranges is None:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def _int_env(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise UserError(f"environment variable {name}={env.get(name)!r}: expected an integer") from None


def job_place(master_addr: str | None, master_port: int | None, env: Mapping[str, str] | None = None) -> JobPlace:
    """This process's place in a torchrun or srun job (flags override the launcher's master address/port)."""
    env = os.environ if env is None else env
    launcher = launched_job(env)
    if launcher == "torchrun":
        rank, world = _int_env(env, "RANK"), _int_env(env, "WORLD_SIZE")
        local = int(env.get("LOCAL_RANK", "0"))
        addr = master_addr or env.get("MASTER_ADDR") or "127.0.0.1"
        port = master_port or (int(env["MASTER_PORT"]) if "MASTER_PORT" in env else DEFAULT_PORT)
    elif launcher == "slurm":
        rank, world = _int_env(env, "SLURM_PROCID"), _int_env(env, "SLURM_NTASKS")
        local = int(env.get("SLURM_LOCALID", "0"))
        addr = master_addr or env.get("MASTER_ADDR") or first_slurm_host(env.get("SLURM_NODELIST", ""))
        job_id = int(env.get("SLURM_JOB_ID", "0") or 0)
        port = master_port or (int(env["MASTER_PORT"]) if "MASTER_PORT" in env else 20000 + job_id % 20000)
    else:
        raise UserError("not launched by torchrun or srun (no RANK/WORLD_SIZE or SLURM_PROCID/SLURM_NTASKS)")
    return JobPlace(launcher, rank, world, local, addr, port)


def resolve(addr: str, flag: str = "--master-addr") -> str:
    try:
        return socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror:
        raise UserError(f"{flag} {addr}: cannot resolve this host name") from None


def check_local_port(addr: str, port: int | None) -> int:
    """For a job this process starts itself: the master must be an address of this host and the port free.
    port None picks a free one. Returns the port."""
    ip = resolve(addr)
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((ip, port or 0))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UserError(f"--master-port {port}: already in use on {addr}; pick another or omit it for a free one") from None
            if err.errno == errno.EADDRNOTAVAIL:
                raise UserError(f"--master-addr {addr}: not an address of this host (with --ranks the master is local)") from None
            raise UserError(f"--master-addr {addr} --master-port {port}: cannot listen ({err.strerror})") from None
        return probe.getsockname()[1]
