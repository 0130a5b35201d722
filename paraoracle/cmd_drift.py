"""`profiler drift OLD NEW`: has this machine changed between two calibrations, and what does it cost?

Exit status (usable from cron and CI): 0 nothing drifted, 1 something drifted, 2 bad input (including two
profiles of different machines without --force). Statistics: calibrate/drift.py.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from calibrate import drift
from calibrate.profile_arguments import profile_help, profile_type
from profiler.errors import UserError
from profiler.profile import Profile, load_profile

COEFFICIENTS_SHOWN = 10
REFERENCE_MODEL = "resnet50"
REFERENCE_BATCH_PER_DEVICE = 32
REFERENCE_WORKLOAD = f"ResNet-50, data parallel, {REFERENCE_BATCH_PER_DEVICE} samples per device, fp32, SGD"

_UNITS = {"FLOP/s": (1e9, "GFLOP/s"), "B/s": (1e9, "GB/s"), "1/s": (1.0, "calls/s"), "s": (1e-6, "µs")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", type=profile_type, help=profile_help("the earlier profile"))
    parser.add_argument("new", metavar="NEW", type=profile_type, help=profile_help("the later profile"))
    parser.add_argument("--min-effect", type=float, default=drift.DEFAULT_MIN_EFFECT, metavar="FRACTION",
                        help="smallest relative change of a coefficient that counts as drift (default 0.05 = 5%%)")
    parser.add_argument("--alpha", type=float, default=drift.DEFAULT_ALPHA, metavar="P",
                        help="family-wise false-alarm rate over all families compared (default 0.05)")
    parser.add_argument("--force", action="store_true", help="compare even if the profiles are of different machines")
    parser.add_argument("--no-predict", action="store_true", help="skip re-predicting the reference workload")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _check_options(args: argparse.Namespace) -> None:
    if not (math.isfinite(args.min_effect) and 0 <= args.min_effect < 1):
        raise UserError(f"--min-effect {args.min_effect}: expected a fraction in [0, 1), e.g. 0.05")
    if not (0 < args.alpha < 1):
        raise UserError(f"--alpha {args.alpha}: expected a probability in (0, 1), e.g. 0.05")


def _load_pair(args: argparse.Namespace) -> tuple[Profile, Profile, list[str]]:
    old, new = load_profile(args.old), load_profile(args.new)
    mismatch = drift.identity_mismatch(old, new)
    if mismatch and not args.force:
        raise UserError(
            f"{args.old} and {args.new} are profiles of different machines ({'; '.join(mismatch)}); "
            "pass --force to compare them anyway"
        )
    setup = drift.setup_mismatch(old, new)
    if setup and not args.force:
        raise UserError(f"{args.old} and {args.new} were measured differently ({'; '.join(setup)}): their times are "
                        "not comparable; pass --force to compare the points they share anyway")
    mismatch = mismatch + setup
    if not old.samples or not new.samples:
        empty = args.old if not old.samples else args.new
        raise UserError(f"{empty}: profile has no samples to compare")
    return old, new, mismatch


def reference_predictions(old_path: str, new_path: str) -> dict:
    """Iteration time of the reference workload (ResNet-50, data parallel over one node's devices,
    REFERENCE_BATCH_PER_DEVICE samples per device, fp32, SGD) predicted from each profile; or why not.

    The predictor is imported lazily, so drift still compares the profiles when it cannot be loaded."""
    try:
        from predictor import api  # noqa: PLC0415 - optional, see docstring
        from predictor.plan import Plan  # noqa: PLC0415
    except ImportError as err:
        return {"workload": REFERENCE_WORKLOAD, "skipped": f"the predictor is not available ({err})"}
    try:
        graph = api.load_model(REFERENCE_MODEL)
        times, devices = [], 1
        for path in (old_path, new_path):
            cost_model, _ = api.load_cost_model(path)
            devices = max(1, int(cost_model.devices_per_node))
            plan = Plan("data", batch=REFERENCE_BATCH_PER_DEVICE * devices, devices=devices,
                        devices_per_node=devices, p_data=devices)
            prediction = api.predict(graph, plan, cost_model, interval=False)
            if not prediction.feasible:
                return {"workload": REFERENCE_WORKLOAD, "skipped": f"{path}: reference workload infeasible"}
            times.append(prediction.iteration_s)
    except UserError as err:
        return {"workload": REFERENCE_WORKLOAD, "skipped": str(err)}
    workload = f"{REFERENCE_WORKLOAD} over {devices} device{'s' if devices > 1 else ''}"
    return {"workload": workload, "old_s": times[0], "new_s": times[1], "change": times[1] / times[0] - 1}


def _fmt_value(value: float, unit: str) -> str:
    scale, label = _UNITS[unit]
    return f"{value / scale:.4g} {label}"


def _fmt_confidence(p_value: float) -> str:
    return ">99.9%" if p_value < 1e-3 else f"{1 - p_value:.1%}"


def _report_dict(report: drift.DriftReport, new: Profile, args, mismatch, diffs, coeffs, prediction) -> dict:
    return {
        "old": args.old,
        "new": args.new,
        "machine": drift.identity(new),
        "identity_mismatch": mismatch,
        "min_effect": report.min_effect,
        "alpha": report.alpha,
        "drifted": bool(report.drifted),
        "points_only_in_old": report.only_old,
        "points_only_in_new": report.only_new,
        "families": [
            {
                "family": f.family,
                "category": f.category,
                "unit": f.unit,
                "points": f.points,
                "old": f.old_value,
                "new": f.new_value,
                "change": f.change,
                "change_ci": list(f.change_ci),
                "p_value": f.p_value,
                "significant": f.significant,
                "drifted": f.drifted,
                "threads_old": f.threads_old,
                "threads_new": f.threads_new,
                "causes": f.causes,
            }
            for f in report.families
        ],
        "metadata_differences": [{"field": d.field, "old": d.old, "new": d.new} for d in diffs],
        "coefficient_changes": [
            {"name": c.name, "old": c.old, "new": c.new, "change": c.change, "old_interval": c.old_interval,
             "new_interval": c.new_interval}
            for c in coeffs
        ],
        "reference_workload": prediction,
    }


def _print_text(report: drift.DriftReport, old: Profile, new: Profile, args, mismatch, coeffs, prediction) -> None:
    out = sys.stdout
    ident = drift.identity(new)
    print(f"profiler drift: {args.old} ({old.created}) -> {args.new} ({new.created})", file=out)
    print(f"machine: {ident['hostname']}, CPU {ident['cpu_model']}, GPUs {ident['gpus'] or 'none'}", file=out)
    if mismatch:
        print(f"WARNING: different machines, compared because of --force: {'; '.join(mismatch)}", file=out)
    n_points = sum(f.points for f in report.families)
    print(
        f"compared {len(report.families)} coefficient families over {n_points} benchmark points "
        f"(family-wise false-alarm rate {report.alpha:.0%}, minimum effect {report.min_effect:.0%})",
        file=out,
    )
    if report.only_old or report.only_new:
        print(f"not compared: {report.only_old} points only in OLD, {report.only_new} only in NEW", file=out)
    significant = [f for f in report.families if f.significant]
    if not significant:
        print("\nno significant change in any family", file=out)
    else:
        rows = [("", "family", "points", "old", "new (est.)", "change", "interval", "confidence")]
        for f in sorted(significant, key=lambda f: -abs(f.change)):
            rows.append((
                "DRIFT" if f.drifted else "small",
                f.family,
                str(f.points),
                _fmt_value(f.old_value, f.unit),
                _fmt_value(f.new_value, f.unit),
                f"{f.change:+.1%}",
                f"[{f.change_ci[0]:+.1%}, {f.change_ci[1]:+.1%}]",
                _fmt_confidence(f.p_value),
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        print("\nsignificant changes (change of the coefficient: throughput/bandwidth, or latency for alpha;", file=out)
        print("interval at the family-wise level; 'small' = significant but below the minimum effect):", file=out)
        for r in rows:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
        drifted = report.drifted
        if drifted:
            print("\nlikely causes:", file=out)
            for f in drifted:
                causes = f.causes or ["no recorded metadata difference explains it (background load, thermal "
                                      "state, or a change the profile does not record)"]
                print(f"  {f.family}: {'; '.join(causes)}", file=out)
    unchanged = len(report.families) - len(significant)
    if significant and unchanged:
        print(f"\n{unchanged} other families: no significant change", file=out)
    if coeffs:
        shown = coeffs[:COEFFICIENTS_SHOWN]
        print(f"\nfitted coefficients that moved by >= {report.min_effect:.0%} with disjoint confidence intervals "
              f"(informational; drift is decided on raw samples above){'' if len(coeffs) == len(shown) else f', largest {len(shown)} of {len(coeffs)}'}:",
              file=out)
        for c in shown:
            print(f"  {c.name}: {c.old:.4g} -> {c.new:.4g} ({c.change:+.1%})", file=out)
    if prediction is not None:
        print(f"\nreference workload ({prediction['workload']}):", file=out)
        if prediction.get("skipped"):
            print(f"  skipped: {prediction['skipped']}", file=out)
        else:
            print(f"  predicted iteration time {prediction['old_s']:.4g} s -> {prediction['new_s']:.4g} s "
                  f"({prediction['change']:+.1%})", file=out)
    n_drifted = len(report.drifted)
    verdict = f"{n_drifted} {'family' if n_drifted == 1 else 'families'} drifted" if n_drifted else "nothing drifted"
    print(f"\nverdict: {verdict} (exit {1 if report.drifted else 0})", file=out)


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    old, new, mismatch = _load_pair(args)
    report = drift.compare_samples(old.samples, new.samples, min_effect=args.min_effect, alpha=args.alpha)
    if not report.families:
        raise UserError(f"{args.old} and {args.new} have no benchmark point in common; nothing to compare")
    diffs = drift.attribute_causes(report, old, new)
    coeffs = drift.coefficient_changes(old.coefficients, new.coefficients, args.min_effect)
    prediction = None if args.no_predict else reference_predictions(args.old, args.new)
    if args.json:
        print(json.dumps(_report_dict(report, new, args, mismatch, diffs, coeffs, prediction), indent=2, default=str))
    else:
        _print_text(report, old, new, args, mismatch, coeffs, prediction)
    return 1 if report.drifted else 0
