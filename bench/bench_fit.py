"""Fit quality: held-out median error of every fit (targets: each collective fit <= 10%, each compute fit <= 15%).

On a real calibration: each fit's held-out median relative error against its target, the stored extrapolation
errors, the samples' sampling noise (what a perfect model would show: calibrate.alphabeta.sampling_noise), the
held-out error of each kernel regime apart where a backend tells them apart (FitQuality.by_kernel), and the fit's
run time. Prints figures only (accuracy depends on how quiet the machine was); records the worst fit of each family
against its target in results/fit.json.

    python -m bench fit                      # quick CPU calibration with 2 ranks, then the figures
    python -m bench fit --profile PATH       # figures for an existing profile (refitted, not rewritten)
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import describe
from bench.record import Figure, add_results_flag, record
from calibrate.coefficients import parse_coefficients
from calibrate.fit import fit_profile
from profiler.errors import UserError
from profiler.profile import load_profile

NAME = "fit"
TARGETS = {"collective": 0.10, "compute": 0.15}


def calibrate(out: Path) -> None:
    cmd = [sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--quick", "--ranks", "2", "--out", str(out)]
    print("running:", " ".join(cmd), flush=True)
    code = subprocess.run(cmd).returncode
    if code != 0:
        raise UserError(f"profiler calibrate failed (exit {code})")


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--profile", help="existing profile with samples (default: calibrate now)")
    add_results_flag(parser)


def figures(rows, fit_s: float) -> list[Figure]:
    """Per family with a target: its worst fit's held-out median error, and how many fits meet the target."""
    out = []
    for family, target in TARGETS.items():
        errors = [q.median_rel_error for fam, _, q, _ in rows if fam == family and q is not None]
        out.append(Figure(f"{family} fits: worst held-out median error", round(max(errors) * 100, 6) if errors else None, "%",
                          f"<= {target * 100:g}"))
        out.append(Figure(f"{family} fits within {target:.0%}", sum(e <= target for e in errors),
                          f"fits of {len(errors)}"))
    out.append(Figure("fit time", fit_s, "s"))
    return out


def run(args) -> int:
    if args.profile:
        path = Path(args.profile)
    else:
        path = Path(tempfile.mkdtemp()) / "quick.yaml"
        calibrate(path)
    profile = load_profile(path)
    start = time.perf_counter()
    fitted = fit_profile(profile)
    fit_s = time.perf_counter() - start
    c = parse_coefficients(fitted.coefficients, path)
    print(f"\nprofile {path}: {len(profile.samples)} samples, fit in {fit_s:.1f} s")
    rows = [("compute", k, f.quality, f.extrapolation) for k, f in sorted(c.compute.items())]
    rows += [("memory", k, f.quality, None) for k, f in sorted(c.memory.items())]
    rows += [("collective", f"{f.op} p={f.group_size} nodes={f.nodes}", f.quality, None) for f in c.collectives]
    print(f"{'family':<11}{'fit':<34}{'held-out median':>16}{'max':>9}{'target':>8}  {'ok':<4}{'extrapolation median':>21}"
          f"{'sampling noise':>15}  held-out median per CPU conv kernel")
    for family, name, q, ex in rows:
        target = TARGETS.get(family)
        if q is None:
            print(f"{family:<11}{name:<34}{'(too few samples)':>16}")
            continue
        ok = "" if target is None else ("yes" if q.median_rel_error <= target else "NO")
        tgt = f"{target:.0%}" if target else "-"
        extra = f"{ex.median_rel_error:.1%} ({ex.n_test})" if ex else ""
        noise = f"{q.sample_noise_rel_error:.1%}" if q.sample_noise_rel_error is not None else ""
        kernels = ", ".join(f"{k} {v:.1%}" for k, v in q.by_kernel.items()) if q.by_kernel else ""
        print(f"{family:<11}{name:<34}{q.median_rel_error:>16.1%}{q.max_rel_error:>9.1%}{tgt:>8}  {ok:<4}{extra:>21}"
              f"{noise:>15}  {kernels}")
    record(NAME, figures(rows, fit_s), args.results)
    return 0
