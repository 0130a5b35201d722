"""Failure messages, and the fault-injection hook the fault tests use.

PARAORACLE_FAULT="rank:R,op:OP[,size:BYTES][,mode:exit|hang]" makes rank R exit (code 3) or hang when it
reaches operation OP at message size >= BYTES (default: the first size).
PARAORACLE_HOSTS="a,a,b,b" makes rank r report host name number r, so one machine can stand in for several
nodes (intra- vs inter-node groups). Both are for tests only; unset in real use.
"""
from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass

from profiler.errors import UserError

FAULT_ENV = "PARAORACLE_FAULT"
HOSTS_ENV = "PARAORACLE_HOSTS"


@dataclass(frozen=True)
class Fault:
    rank: int
    op: str
    size_bytes: int = 0
    mode: str = "exit"


def parse_fault(text: str | None) -> Fault | None:
    if not text:
        return None
    fields = {}
    for part in text.split(","):
        key, sep, value = part.partition(":")
        if not sep:
            raise UserError(f"{FAULT_ENV}={text!r}: expected comma-separated key:value pairs")
        fields[key.strip()] = value.strip()
    try:
        fault = Fault(int(fields["rank"]), fields["op"], int(fields.get("size", 0)), fields.get("mode", "exit"))
    except (KeyError, ValueError):
        raise UserError(f"{FAULT_ENV}={text!r}: needs rank:INT,op:NAME[,size:INT][,mode:exit|hang]") from None
    if fault.mode not in ("exit", "hang"):
        raise UserError(f"{FAULT_ENV}={text!r}: mode must be exit or hang")
    return fault


def fault_from_env() -> Fault | None:
    return parse_fault(os.environ.get(FAULT_ENV))


def maybe_inject(fault: Fault | None, rank: int, op: str, size_bytes: int) -> None:
    """Called by every rank of the group before each measurement point."""
    if fault is None or fault.rank != rank or fault.op != op or size_bytes < fault.size_bytes:
        return
    if fault.mode == "exit":
        os._exit(3)
    while True:  # hang: the peers' timeouts and the launcher's watchdog must end the run
        time.sleep(3600)


def host_name(rank: int) -> str:
    """This rank's host name, or its stand-in from PARAORACLE_HOSTS."""
    stand_ins = [h.strip() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip()]
    return stand_ins[rank] if rank < len(stand_ins) else socket.gethostname()


class CommFailure(UserError):
    """A measurement point failed (peer died, hung, or the backend raised)."""

    def __init__(self, op: str, size_bytes: int, group_label: str, cause: str):
        self.op, self.size_bytes, self.group_label = op, size_bytes, group_label
        super().__init__(f"collective {op} at {size_bytes} B on {group_label} failed: {cause}")


def short_cause(err: BaseException) -> str:
    """First line of a backend error, trimmed (gloo/NCCL messages run to many lines)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
    text = re.sub(r"^\[[^\]]*:\d+\]\s*", "", text)  # gloo's "[.../pair.cc:537] " source location
    text = text.split(". This is typically")[0]  # gloo's generic advice after the cause
    return f"{err.__class__.__name__}: {text[:200]}"
