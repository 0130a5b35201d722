"""`predictor train-correction --profile P --runs runs.jsonl [--out PATH [--attach]] [--force]`: fit the residual
correction from measured runs (calibrate/correction.py), print the grouped cross-validation table and write it.
The runs file may also be given positionally; the profile is a path or a shipped name (read-only: give --out
without --attach).

Without --out the correction goes beside the profile (<profile>.correction.json) and the profile is pointed at
it (path + sha256); with --out it goes to PATH and the profile is left as it is unless --attach. An existing
--out is replaced only with --force. Profile and correction change together, through a name no reference points
to yet and atomic renames, so a kill at any moment leaves a profile whose reference matches its file
(docs/validation.md, "Residual correction").
"""
from __future__ import annotations

import argparse
from pathlib import Path

from calibrate.correction import file_sha256, fit_correction, read_runs, save_correction
from calibrate.profile_arguments import add_profile_argument, check_not_shipped
from predictor.flags import add_runs_argument, runs_of
from profiler.cliutil import seed
from profiler.errors import UserError
from profiler.outputs import check_output, check_writable, same_file
from profiler.profile import load_profile, save_profile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_argument(parser, "profile the runs were predicted with", required=True)
    add_runs_argument(parser, "measured runs, JSONL (from `predictor validate --out`)", many=False)
    parser.add_argument("--out", type=Path, default=None,
                        help="correction file to write (default: <profile>.correction.json beside the profile, "
                             "which the profile then references)")
    parser.add_argument("--attach", action="store_true", help="with --out: also point the profile at the new file")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    parser.add_argument("--seed", type=seed, default=0, help="random seed of the tree models (default 0, at most 2^32-1)")


def default_out(profile_path: Path) -> Path:
    return profile_path.with_name(profile_path.stem + ".correction.json")


def _referenced(profile, profile_path: Path) -> Path | None:
    if profile.correction is None:
        return None
    path = Path(profile.correction.path)
    return path if path.is_absolute() else profile_path.parent / path


def _check_paths(args, profile) -> tuple[Path, bool]:
    """(correction path, whether the profile is updated), refused before any fitting."""
    attach = args.out is None or args.attach
    out = args.out or default_out(args.profile)
    for other, flag in ((args.profile, "--profile"), (args.runs, "--runs")):
        if same_file(out, other):
            raise UserError(f"--out {out}: is the {flag} file; give the correction its own file (e.g. {default_out(args.profile)})")
    current = _referenced(profile, args.profile)
    replacing_own = current is not None and same_file(out, current)
    check_output(out, "--out", args.force or replacing_own or args.out is None)
    if attach:
        check_not_shipped(args.profile, "--profile", " or write the correction with --out (without --attach)")
        check_writable(args.profile, "--profile")
    return out, attach


def attach_correction(spec, out: Path, profile, profile_path: Path) -> None:
    """Write the correction to `out` and point the profile at it, the pair consistent after any kill."""
    current = _referenced(profile, profile_path)
    if current is not None and same_file(out, current):
        staged = out.with_name(f".{out.name}.next")
        profile.correction = save_correction(spec, staged, profile, profile_path)
        save_profile(profile, profile_path)  # now references the staged copy; the old pair is gone whole
    profile.correction = save_correction(spec, out, profile, profile_path)
    save_profile(profile, profile_path)
    if current is not None and same_file(out, current):
        staged.unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    args.runs, args.profile = runs_of(args, many=False)[0], Path(args.profile)
    profile = load_profile(args.profile)
    out, attach = _check_paths(args, profile)
    records, skipped = read_runs(args.runs)
    if skipped:
        print(f"skipped {skipped} runs without an analytical prediction or a measurement")
    try:
        spec, report = fit_correction(records, profile, seed=args.seed, runs_source={
            "path": str(args.runs), "sha256": file_sha256(args.runs), "rows": len(records)})
    except UserError as err:
        raise UserError(f"--runs {args.runs}: {err}") from None
    print(report.table())
    if attach:
        attach_correction(spec, out, profile, args.profile)
    else:
        save_correction(spec, out, profile, args.profile)
    analytical, corrected, worst = report.headline
    print(f"held-out mean accuracy: analytical {analytical:.1%} -> corrected {corrected:.1%} overall "
          f"(worse CV scheme), worst strategy {worst:.1%}")
    if attach:
        print(f"wrote {out}; {args.profile} now references it (sha256 {profile.correction.sha256[:12]})")
    else:
        print(f"wrote {out}; {args.profile} is unchanged (pass --attach to make it use this correction)")
    return 0
