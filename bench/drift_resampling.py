"""Drift detection: false-alarm rate (target <= 5%) and detection power of `profiler drift` on re-sampled profiles.

For each profile: PAIRS pairs of pseudo-profiles of an unchanged machine (each point's samples split into
two random halves when a point has >= 10 samples, else each pseudo-profile drawn with replacement), then
the same with a 15% slow-down injected into one family at a time. Prints the rates and records them in
results/drift-resampling.json (false alarms against the 5% target, per profile).

    python -m bench drift-resampling [PROFILE.yaml ...] [--pairs 200]

Defaults to the profiles committed under tests/data: 40 samples per point on a quiet and on a heavily
loaded machine (`python -m bench drift-testdata`), and a real `profiler calibrate --device cpu --quick` profile.
"""
from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np

from bench import describe
from bench.record import REPO, Figure, add_results_flag, record
from calibrate import drift
from profiler.cliutil import int_in
from profiler.profile import load_profile

NAME = "drift-resampling"
TARGET_FALSE_ALARMS_PCT = "<= 5"
DATA = REPO / "tests" / "data"
DEFAULTS = [DATA / "drift_cpu_profile.yaml", DATA / "drift_cpu_profile_loaded.yaml", DATA / "drift_quick_cpu_profile.yaml"]


def pseudo_pair(points, rng, scale_family=None, scale=1.15):
    old, new = {}, {}
    for key, point in points.items():
        times = point.times_s
        if len(times) >= 10:
            shuffled = rng.permutation(times)
            a, b = shuffled[: len(times) // 2], shuffled[len(times) // 2 :]
        else:
            a, b = rng.choice(times, len(times)), rng.choice(times, len(times))
        old[key], new[key] = copy.copy(point), copy.copy(point)
        old[key].times_s = a
        new[key].times_s = b * (scale if point.family == scale_family else 1.0)
    return old, new


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("profiles", nargs="*", default=DEFAULTS)
    parser.add_argument("--pairs", type=int_in(1, 100000), default=200)
    add_results_flag(parser)


def run(args) -> int:
    rng = np.random.default_rng(2026)
    figures = []
    for path in args.profiles:
        points = drift.points_of(load_profile(path).samples)
        families = sorted({p.family for p in points.values()})
        samples = np.median([len(p.times_s) for p in points.values()])
        started = time.perf_counter()
        alarms = sum(bool(drift.compare_points(*pseudo_pair(points, rng), rng=rng).drifted) for _ in range(args.pairs))
        print(f"{path}: {len(points)} points, {len(families)} families, median {samples:.0f} samples per point")
        print(f"  false alarms (unchanged machine): {alarms}/{args.pairs} = {alarms / args.pairs:.1%} "
              f"({(time.perf_counter() - started) / args.pairs * 1e3:.0f} ms per comparison)")
        per_family = max(20, args.pairs // 5)
        detected = []
        for family in families:
            right = sum(
                [f.family for f in drift.compare_points(*pseudo_pair(points, rng, family), rng=rng).drifted] == [family]
                for _ in range(per_family)
            )
            detected.append(right / per_family)
            print(f"  15% slow-down in {family:32s} detected and named alone: {right}/{per_family} = {right / per_family:.0%}")
        figures += [Figure(f"{Path(path).name}: false alarms", 100 * alarms / args.pairs, f"% of {args.pairs} pairs",
                           TARGET_FALSE_ALARMS_PCT),
                    Figure(f"{Path(path).name}: 15% slow-down detected, worst family",
                           100 * min(detected) if detected else None, "%")]
    record(NAME, figures, args.results)
    return 0
