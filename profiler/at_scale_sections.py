"""The at-scale parts of `profiler calibrate` (docs/calibration.md#at-scale): the storage section (`--only storage
--path DIR --readers N`, profiler.bench_storage) and collectives repeated over time (`--repeat-over MINUTES`), whose
round-to-round spread calibrate.fabric turns into the fabric's background load and `profiler history` tracks.

Repetition: ROUNDS(MINUTES) rounds of the whole collectives sweep (the operations of --collectives), round k
starting k * MINUTES * 60 / rounds seconds after the first (right after the previous one when that ran over its
slot); every sample carries its round and start time in `extra`. Under torchrun or srun every rank follows the same
schedule (run_worker_repeated). Every flag is checked before anything is measured (`preflight`).
"""
from __future__ import annotations

import argparse
import math
import time

from profiler.cliutil import float_in, int_in
from profiler.errors import UserError

#: at least this many rounds (a spread needs a few), at most this many, one per ROUND_EVERY_MIN minutes between
MIN_ROUNDS, MAX_ROUNDS, ROUND_EVERY_MIN = 3, 24, 5.0
MAX_REPEAT_MINUTES = 7 * 24 * 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from profiler.bench_storage import MAX_READERS
    g = parser.add_argument_group("at scale")
    g.add_argument("--path", metavar="DIR",
                   help="storage section: a folder on the file system the training data is read from (the benchmark "
                        "writes and reads its own files in a temporary folder there, then removes them)")
    g.add_argument("--readers", type=int_in(1, MAX_READERS), default=4,
                   help="storage section: reader threads, as a node's data loader workers (default 4)")
    g.add_argument("--repeat-over", type=float_in(0.0, MAX_REPEAT_MINUTES), metavar="MINUTES", default=None,
                   help="collectives section: repeat the collectives sweep in rounds spread over MINUTES (one round "
                        f"per {ROUND_EVERY_MIN:g} minutes, {MIN_ROUNDS}-{MAX_ROUNDS} rounds) and keep every round: the "
                        "spread of inter-leaf collectives gives the fabric's background load (profiler history "
                        "tracks it)")


def rounds(minutes: float) -> int:
    return int(min(MAX_ROUNDS, max(MIN_ROUNDS, math.ceil(minutes / ROUND_EVERY_MIN))))


def preflight(args, sections: list[str]) -> None:
    """One-line UserErrors for a storage section without a usable --path, a --path or --readers without the
    storage section, and --repeat-over without the collectives section."""
    from profiler.bench_storage import check_path
    path = getattr(args, "path", None)
    if "storage" in sections:
        if not path:
            raise UserError("--only storage: give --path DIR, a folder on the file system the training data is read from")
        check_path(path)
    elif path:
        raise UserError("--path: only the storage section reads it; add storage to --only")
    repeat = getattr(args, "repeat_over", None)
    if repeat is not None:
        if "collectives" not in sections:
            raise UserError("--repeat-over: it repeats the collectives section; add collectives to --only")
        if repeat <= 0:
            raise UserError(f"--repeat-over {repeat}: expected a positive number of minutes")


def measure_storage(args, device: str, sink) -> dict:
    """The storage section: its samples to sink; the settings to record."""
    from profiler.bench_storage import filesystem_of, measure_storage as measure
    samples = measure(args.path, args.readers, bool(args.quick), device, sink)
    return {"path": str(args.path), "readers": args.readers, "filesystem": filesystem_of(args.path),
            "samples": len(samples)}


def measure_collectives(args, device: str, sink) -> dict:
    """The collectives section, once, or in rounds with --repeat-over (module docstring)."""
    from profiler.comm import section as collectives
    minutes = getattr(args, "repeat_over", None)
    if minutes is None:
        return collectives.measure(args, device, args.quick, sink)
    count, slot_s = rounds(minutes), minutes * 60.0 / rounds(minutes)
    started = time.perf_counter()
    results = []
    for k in range(count):
        wait = started + k * slot_s - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        round_started = round(time.perf_counter() - started, 3)

        def tagged(sample, k=k, at=round_started):
            sample.extra.update(round=k, round_started_s=at)
            sink(sample)

        result = collectives.measure(args, device, args.quick, tagged)
        results.append(result)
        if "skipped" in result:
            return result
    return {**results[0], "repeat": {"minutes": minutes, "rounds": count, "slot_s": round(slot_s, 3),
                                     "duration_s": round(time.perf_counter() - started, 3)}}


def run_worker_repeated(args) -> int:
    """A non-zero rank under torchrun/srun with --repeat-over: take part in every round on rank 0's schedule."""
    from profiler.comm import section as collectives
    minutes = getattr(args, "repeat_over", None)
    if minutes is None:
        return collectives.run_worker(args)
    count, slot_s = rounds(minutes), minutes * 60.0 / rounds(minutes)
    started = time.perf_counter()
    for k in range(count):
        wait = started + k * slot_s - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        code = collectives.run_worker(args)
        if code:
            return code
    return 0
