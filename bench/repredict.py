"""Re-predict measured runs already taken (validation datasets) with a profile and print the accuracy.

Runs on the development VM vary by 10-40% between suite runs, so comparing two versions of the model by running
the suite twice mixes the model's change with the machine's. This holds the measurements still: the same runs
(pooled over every dataset given, median per run) against each version's predictions (the profile refitted with
the current fitting code). Prints mean accuracy per strategy and the nets whose fastest strategy the prediction
names (predictor.random_report.net_ranking).

    python -m bench repredict --profile P.yaml out/validate-A.jsonl [out/validate-B.jsonl ...]
    python -m bench repredict --profile P.yaml --refit out/validate-*.jsonl   # refit P's samples first
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from bench import describe
from calibrate.cost_model import load_cost_model
from calibrate.fit import fit_profile
from predictor.datasets import repredicted
from predictor.random_report import net_ranking
from predictor.validate_report import accuracy
from profiler.errors import UserError
from profiler.profile import load_profile


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("datasets", nargs="+", help="validate JSONL files (runs pooled by label and scenario)")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--refit", action="store_true", help="refit the profile's samples with the current code")
    parser.add_argument("--rows", action="store_true", help="print every run")


def run(args) -> int:
    profile = load_profile(args.profile)
    cost_model = load_cost_model(fit_profile(profile) if args.refit else profile)
    by_strategy = defaultdict(list)
    ranked = []
    for label, scenario, row, prediction in repredicted(args.datasets, cost_model):
        ranked.append({**row, "label": label, "predicted_time_s": prediction.iteration_s})
        acc = accuracy(prediction.iteration_s, row["measured_time_s"])
        by_strategy[label].append(acc)
        if args.rows:
            print(f"{label:17} {scenario[:50]:50} measured {row['measured_time_s'] * 1e3:8.2f} ms (x{row['repeats']}) "
                  f"predicted {prediction.iteration_s * 1e3:8.2f} ms  {acc:6.1%}")
    print(f"profile {args.profile}{' (refitted)' if args.refit else ''}; {len(args.datasets)} dataset(s)")
    everything = [a for accs in by_strategy.values() for a in accs]
    if not everything:
        raise UserError("no run of the datasets has a feasible prediction with this profile")
    for label, accs in sorted(by_strategy.items()):
        print(f"  {label:17} {statistics.mean(accs):6.1%}  ({len(accs)} runs)")
    print(f"  {'overall':17} {statistics.mean(everything):6.1%}  ({len(everything)} runs)")
    nets = net_ranking(ranked)
    if nets:
        print(f"  fastest strategy named for {sum(n['agree'] for n in nets)}/{len(nets)} nets")
    return 0
