"""`predictor train-correction --profile P --runs runs.jsonl [--out PATH]`: fit the residual correction
from measured runs (calibrate/correction.py), print the grouped cross-validation table, write the
correction and point the profile at it (path + sha256), each file written atomically."""
from __future__ import annotations

import argparse
from pathlib import Path

from calibrate.correction import file_sha256, fit_correction, read_runs, save_correction
from profiler.profile import check_writable, load_profile, save_profile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", required=True, type=Path, help="profile YAML the runs were predicted with; its correction reference is updated")
    parser.add_argument("--runs", required=True, type=Path, help="measured runs, JSONL (from `predictor validate --out`)")
    parser.add_argument("--out", type=Path, default=None, help="correction file to write (default: <profile>.correction.json beside the profile)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the tree models (default 0)")


def default_out(profile_path: Path) -> Path:
    return profile_path.with_name(profile_path.stem + ".correction.json")


def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    out = check_writable(args.out or default_out(args.profile), "--out")
    check_writable(args.profile, "--profile")
    records, skipped = read_runs(args.runs)
    if skipped:
        print(f"skipped {skipped} runs without an analytical prediction or a measurement")
    spec, report = fit_correction(records, profile, seed=args.seed,
                                  runs_source={"path": str(args.runs), "sha256": file_sha256(args.runs), "rows": len(records)})
    print(report.table())
    profile.correction = save_correction(spec, out, profile, args.profile)
    save_profile(profile, args.profile)
    analytical, corrected, worst = report.headline
    print(f"held-out mean accuracy: analytical {analytical:.1%} -> corrected {corrected:.1%} overall "
          f"(worse CV scheme), worst strategy {worst:.1%}")
    print(f"wrote {out}; {args.profile} now references it (sha256 {profile.correction.sha256[:12]})")
    return 0
