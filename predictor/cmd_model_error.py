"""`predictor model-error --profile P DATASET [DATASET ...] [--coverage 0.8] [--write] [--json]`: how far this
profile's predictions fall from measured runs (mean and least accuracy), and prediction intervals learned from it.
The datasets may also be given with --runs (as `predictor train-correction` takes them); the profile is a path or a
shipped name.

Every run of the validation datasets (`predictor validate --out`, repeats pooled by median) is predicted again
with the profile; the residuals log(measured / predicted) give, per strategy, the interval that holds the
central `--coverage` share of runs (predictor.model_error). The table says how often a run falls inside the
interval learned **without its own model** (leave-one-model-out): that is what an interval promises for a model
the datasets never ran. `--write` stores the quantiles learned from every run in the profile
(coefficients.model_error), so `predictor run` widens each prediction's interval by them.
"""
from __future__ import annotations

import argparse
import json
import math

from calibrate.profile_arguments import add_profile_argument, check_not_shipped
from predictor.flags import add_runs_argument, runs_of
from predictor.model_error import (Residual, bounds_for, error_quantiles, held_out_coverage, in_sample_coverage,
                                   log_ratio)
from profiler.errors import UserError


def coverage_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0.5 and 0.99, got {text!r}") from None
    if not 0.5 <= value <= 0.99:
        raise argparse.ArgumentTypeError(f"expected a number between 0.5 and 0.99, got {text!r}")
    return value


def accuracy_of(log_ratio_: float) -> float:
    """1 - |predicted - measured| / measured of a residual log(measured / predicted)."""
    return 1.0 - abs(math.exp(-log_ratio_) - 1.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_runs_argument(parser, "validation datasets, JSONL (`predictor validate --out`)", many=True)
    add_profile_argument(parser, "profile to predict the runs with", required=True)
    parser.add_argument("--coverage", type=coverage_fraction, default=0.8,
                        help="central share of runs the interval holds (default 0.8)")
    parser.add_argument("--write", action="store_true",
                        help="store the quantiles in the profile (coefficients.model_error)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def residuals_of(datasets: list[str], cost_model) -> list[Residual]:
    """One residual per pooled run with a feasible prediction; the run's model (and knobs) is its group."""
    from predictor.datasets import repredicted

    return [Residual(label, prediction.plan.framework, f"{row['model']} {json.dumps(row['knobs'], sort_keys=True)}",
                     log_ratio(row["measured_time_s"], prediction.iteration_s))
            for label, _, row, prediction in repredicted(datasets, cost_model) if prediction.iteration_s > 0]


def run(args: argparse.Namespace) -> int:
    from calibrate.coefficients import ModelError
    from calibrate.cost_model import load_cost_model
    from profiler.profile import load_profile, save_profile

    args.datasets = [str(path) for path in runs_of(args, many=True)]
    if args.write:
        check_not_shipped(args.profile, "--profile")
    profile = load_profile(args.profile)
    residuals = residuals_of(args.datasets, load_cost_model(profile))
    if not residuals:
        raise UserError(f"{', '.join(args.datasets)}: no run with a measured time and a feasible prediction")
    quantiles = error_quantiles(residuals, args.coverage)
    held = held_out_coverage(residuals, args.coverage)
    accuracies = [accuracy_of(r.log_ratio) for r in residuals]
    report = {"profile": str(args.profile), "runs": len(residuals), "coverage": args.coverage,
              "mean_accuracy": sum(accuracies) / len(accuracies), "least_accuracy": min(accuracies),
              "quantiles": {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in quantiles.items()},
              "in_sample_share_inside": in_sample_coverage(residuals, quantiles),
              "held_out_by_model": held}
    if args.write:
        sources = [f"residuals of {len(residuals)} measured runs of {', '.join(args.datasets)} "
                   f"(predictor model-error; leave-one-model-out coverage "
                   f"{held['share_inside']:.1%} of nominal {args.coverage:.0%})" if held["share_inside"] is not None
                   else f"residuals of {len(residuals)} measured runs of {', '.join(args.datasets)}"]
        model_error = ModelError(coverage=args.coverage, quantiles=quantiles, rows=len(residuals), sources=sources)
        profile.coefficients = {**profile.coefficients, "model_error": model_error.model_dump(mode="json")}
        save_profile(profile, args.profile)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.profile}: {len(residuals)} measured runs, mean accuracy {report['mean_accuracy']:.1%} (least "
          f"{report['least_accuracy']:.1%}); interval holding the central {args.coverage:.0%} (measured / predicted)")
    print(f"  {'strategy':18} {'runs':>5} {'interval':>15} {'inside, held out by model':>26}")
    framework = {r.strategy: r.framework for r in residuals}
    for strategy, stats in held["by_strategy"].items():
        lo, hi = bounds_for(quantiles, strategy, framework[strategy])
        print(f"  {strategy:18} {stats['runs']:5d} {math.exp(lo):6.2f} - {math.exp(hi):5.2f}  "
              f"{stats['share_inside']:25.1%}")
    if held["share_inside"] is not None:
        print(f"  {'overall':18} {held['runs']:5d} {'':15} {held['share_inside']:25.1%}  (nominal {args.coverage:.0%})")
    print(f"wrote the quantiles into {args.profile}" if args.write else "(--write stores the quantiles in the profile)")
    return 0
