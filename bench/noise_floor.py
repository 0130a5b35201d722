"""Noise floor: the accuracy a perfect predictor could reach on these measured runs (>= 95% needed to show the target).

For every run measured in two or more datasets, each dataset's time is "predicted" by the median of the same run
in the others (leave one out) and scored as `predictor validate` scores a prediction: no model enters, so this is
the ceiling run-to-run variation puts on any predictor's accuracy, per strategy. Records results/noise-floor.json
with the validation targets. Datasets must measure the same suite with the same measurement code
(`measured_time_s` is the mean of the timed steps since docs/decisions/2026-11-29-measured-time-mean.md).

    python -m bench noise-floor out/validate-A.jsonl out/validate-B.jsonl [...]
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from bench import describe
from bench.record import Figure, add_results_flag, record
from predictor.datasets import pooled_runs
from predictor.validate_report import accuracy
from profiler.errors import UserError

NAME = "noise-floor"
TARGET_OVERALL, TARGET_PER_STRATEGY = ">= 95", ">= 85"


def leave_one_out_accuracy(times: list[float]) -> list[float]:
    """Each time scored against the median of the others."""
    return [accuracy(statistics.median(times[:i] + times[i + 1:]), t) for i, t in enumerate(times)]


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("datasets", nargs="+", help="validation datasets (JSON lines) of the same suite")
    add_results_flag(parser)


def run(args) -> int:
    runs = pooled_runs(args.datasets)
    by_label: dict[str, list[float]] = defaultdict(list)
    for (label, _), row in sorted(runs.items()):
        if len(row["measured_times_s"]) >= 2:
            by_label[label] += leave_one_out_accuracy(row["measured_times_s"])
    if not by_label:
        raise UserError("no run was measured in two or more of the datasets")
    print(f"{len(args.datasets)} dataset(s): accuracy of the other datasets' median as the prediction")
    for label, values in sorted(by_label.items()):
        print(f"  {label:18} {statistics.fmean(values):6.1%}  ({len(values)} run measurements)")
    every = [v for values in by_label.values() for v in values]
    print(f"  {'overall':18} {statistics.fmean(every):6.1%}  ({len(every)} run measurements)")
    worst = min(by_label, key=lambda label: statistics.fmean(by_label[label]))
    record(NAME, [
        Figure("overall ceiling", statistics.fmean(every) * 100, "%", TARGET_OVERALL),
        Figure(f"worst strategy ceiling ({worst})", statistics.fmean(by_label[worst]) * 100, "%", TARGET_PER_STRATEGY),
        Figure("datasets", len(args.datasets), "datasets"),
    ] + [Figure(f"{label} ceiling", statistics.fmean(values) * 100, "%") for label, values in sorted(by_label.items())],
        args.results)
    return 0
