"""The supervising process: starts rank processes, turns rank 0's reports into Samples for the sink as
they arrive, and ends the run within a bounded time when a rank dies or hangs (killing every rank it
started, so no orphans), naming the operation, size and group that was being measured."""
from __future__ import annotations

import queue as queue_module
import signal
import time
from typing import Callable

import torch.multiprocessing as mp

from profiler.comm.worker import CommConfig, spawned_rank
from profiler.errors import UserError
from profiler.profile import Sample

POLL_S = 0.2
ERROR_GRACE_S = 5.0  # after a rank exits with an error, wait this long for rank 0 to name the failed point
STARTUP_SLACK_S = 120.0  # importing torch in N fresh processes on a loaded machine is slow


def supervise(config: CommConfig, ranks: list[int], sink: Callable[[Sample], None], local_ranks: list[int] | None = None) -> dict:
    """Run `ranks` of the job as child processes; return rank 0's settings. Raises UserError on failure,
    after every sample measured so far has gone to sink."""
    ctx = mp.get_context("spawn")
    reports = ctx.Queue()
    local_ranks = local_ranks or ranks
    procs = [ctx.Process(target=spawned_rank, args=(r, config, reports, lr), daemon=True) for r, lr in zip(ranks, local_ranks)]
    state = {"settings": {}, "point": "start-up (joining the job)", "errors": {}, "done": False, "terminated": False}
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame):  # a launcher (torchrun) stopping us because another rank failed
        state["terminated"] = True

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for p in procs:
            p.start()
        _watch(procs, ranks, reports, sink, config, state)
        return state["settings"]
    finally:
        signal.signal(signal.SIGTERM, previous)
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=5)
        reports.close()


def _handle(message, sink, state) -> bool:
    """Apply one report; True when it was progress."""
    kind, rank, payload = message
    if kind == "sample":
        sink(Sample(**payload))
    elif kind == "settings":
        state["settings"] = payload
    elif kind == "point":
        state["point"] = payload
    elif kind == "error":
        state["errors"][rank] = payload
    elif kind == "done":
        state["done"] = True
    return True


def _drain(reports, sink, state) -> None:
    while True:
        try:
            _handle(reports.get(timeout=POLL_S), sink, state)
        except queue_module.Empty:
            return


def _watch(procs, ranks, reports, sink, config: CommConfig, state) -> None:
    last_progress = time.monotonic()
    failed_at = None
    while True:
        try:
            _handle(reports.get(timeout=POLL_S), sink, state)
            last_progress = time.monotonic()
        except queue_module.Empty:
            pass
        now = time.monotonic()
        codes = [p.exitcode for p in procs]
        if state["done"] and all(c == 0 for c in codes):
            _drain(reports, sink, state)
            return
        if state["terminated"]:
            _drain(reports, sink, state)
            raise UserError(f"collectives stopped by SIGTERM while measuring {state['point']} (torchrun sends it when another rank fails)")
        if state["errors"] or any(c not in (None, 0) for c in codes):
            failed_at = failed_at or now
            exited = dict(zip(ranks, codes))
            rank0_said_why = 0 in state["errors"] and exited.get(0) is not None  # its message names the point
            if rank0_said_why or all(c is not None for c in codes) or now - failed_at > ERROR_GRACE_S:
                _drain(reports, sink, state)
                raise UserError(_failure_message(state, exited))
        started = state["point"].startswith("start-up")
        allowed_s = config.timeout_s + (STARTUP_SLACK_S + config.timeout_s if started else 10.0)
        if now - last_progress > allowed_s:
            _drain(reports, sink, state)
            raise UserError(f"collective {state['point']}: no progress for {allowed_s:.0f} s (a rank hung?); stopped all ranks")


def _failure_message(state, codes: dict[int, int | None]) -> str:
    """Rank 0's message when it has one (it names the point), and what became of the ranks that said nothing."""
    fates = [f"rank {r} exited with code {c}" if c is not None else f"rank {r} still running (hung?), killed"
             for r, c in sorted(codes.items()) if r not in state["errors"] and c != 0]
    if 0 in state["errors"]:
        message = state["errors"][0]
    elif state["errors"]:
        rank, text = sorted(state["errors"].items())[0]
        message = f"while measuring {state['point']}: rank {rank}: {text}"
    else:
        message = f"collective {state['point']} failed"
    return message + (f" ({'; '.join(fates)})" if fates else "")
