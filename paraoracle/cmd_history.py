"""`profiler history DIR|FILES... [--plot PNG]`: headline coefficients of one machine over time.

Reads every profile given (a folder contributes its *.yaml / *.yml files; in-progress `.partial` files are
skipped), orders them by `created`, prints each family's first and last value and its change points
(calibrate/history.py), and with --plot writes one PNG panel per coefficient family. Calibrations that repeated
their collectives over time (`profiler calibrate --repeat-over`) add the round-to-round spread of the collectives,
the fabric's load by other jobs (calibrate.history.round_spread).
Exit 0 on success, 2 on bad input (fewer than two profiles, profiles of different machines without --force).
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from calibrate import drift, history
from calibrate.profile_arguments import profile_help, profile_type
from profiler.errors import UserError
from profiler.outputs import PLOT_SUFFIXES, check_output
from profiler.profile import Profile, load_profile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR|FILE", type=profile_type,
                        help=profile_help("profile files, or folders of profiles"))
    parser.add_argument("--plot", metavar="PNG", help="write the time-series plot to this file (.png, .pdf or .svg)")
    parser.add_argument("--min-effect", type=float, default=drift.DEFAULT_MIN_EFFECT, metavar="FRACTION",
                        help="smallest level change kept as a change point (default 0.05 = 5%%)")
    parser.add_argument("--force", action="store_true",
                        help="accept profiles of different machines, and overwrite an existing --plot file")
    parser.add_argument("--json", action="store_true", help="print the series and change points as JSON")


def profile_paths(paths: list[str]) -> list[Path]:
    """Expand folders to their profile files (sorted by name); keep explicit files as given."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if os.path.isdir(path):  # os.path: a name too long for the file system is not there (Path raises)
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml"))
            if not found:
                raise UserError(f"{path}: folder holds no profile (*.yaml / *.yml)")
            files.extend(found)
        elif os.path.exists(path):
            files.append(path)
        else:
            raise UserError(f"{path}: no such profile file or folder")
    return files


def _check_same_machine(profiles: list[tuple[Path, Profile]], force: bool) -> list[str]:
    first_path, first = profiles[0]
    problems = []
    for path, prof in profiles[1:]:
        mismatch = drift.identity_mismatch(first, prof) + drift.setup_mismatch(first, prof)
        if mismatch:
            problems.append(f"{path} vs {first_path}: {'; '.join(mismatch)}")
    if problems and not force:
        raise UserError(f"profiles of different machines or measured differently ({problems[0]}); "
                        "pass --force to mix them")
    return problems


def _display(value: float, unit: str) -> str:
    scale, label = {"FLOP/s": (1e9, "GFLOP/s"), "B/s": (1e9, "GB/s"), "1/s": (1.0, "calls/s"), "s": (1e-6, "µs"),
                    "x": (1.0, "x")}[unit]
    return f"{value / scale:.4g} {label}"


def run(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.min_effect) and 0 <= args.min_effect < 1):
        raise UserError(f"--min-effect {args.min_effect}: expected a fraction in [0, 1), e.g. 0.05")
    if args.plot:
        check_output(args.plot, "--plot", args.force, PLOT_SUFFIXES)
    files = profile_paths(args.paths)
    if len(files) < 2:
        raise UserError(f"need at least two profiles for a history, got {len(files)} ({', '.join(map(str, files))})")
    loaded = [(path, load_profile(path)) for path in files]
    mixed = _check_same_machine(loaded, args.force)
    series = history.with_change_points(history.build_series([p for _, p in loaded]), args.min_effect)
    if not series:
        raise UserError("no coefficient family was measured by two or more of these profiles")
    if args.plot:
        host = loaded[0][1].machine.hostname
        history.plot_history(series, args.plot, f"calibration history of {host} ({len(files)} profiles)")

    if args.json:
        print(json.dumps({
            "profiles": [str(p) for p in files],
            "mixed_machines": mixed,
            "series": [
                {
                    "family": s.family,
                    "category": s.category,
                    "unit": s.unit,
                    "points": s.points,
                    "created": [c.isoformat() for c in s.created],
                    "values": s.values,
                    "change_points": [
                        {"created": s.created[i].isoformat(), "change": s.level_change(i)} for i in s.change_points
                    ],
                }
                for s in series
            ],
            "plot": args.plot,
        }, indent=2))
        return 0

    print(f"profiler history: {len(files)} profiles of {loaded[0][1].machine.hostname}, "
          f"{min(c for s in series for c in s.created):%Y-%m-%d %H:%M} .. {max(c for s in series for c in s.created):%Y-%m-%d %H:%M} UTC")
    if mixed:
        print(f"WARNING: mixing machines because of --force: {mixed[0]}" + (f" (+{len(mixed) - 1} more)" if len(mixed) > 1 else ""))
    rows = [("family", "profiles", "first", "last", "change points (UTC date: step in level)")]
    for s in series:
        steps = ", ".join(f"{s.created[i]:%Y-%m-%d %H:%M}: {s.level_change(i):+.1%}" for i in s.change_points) or "none"
        rows.append((s.family, str(len(s.values)), _display(s.values[0], s.unit), _display(s.values[-1], s.unit), steps))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0
