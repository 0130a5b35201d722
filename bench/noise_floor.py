"""How reproducible are the measured runs themselves? The accuracy a perfect predictor could reach here.

For every run measured in two or more datasets, each dataset's time is "predicted" by the median of the
same run in the other datasets (leave one out), and scored as `predictor validate` scores a prediction
(1 - |predicted - measured| / measured). No model enters: this is the ceiling that run-to-run variation of
the machine puts on any predictor's accuracy for one suite run, per strategy.

    python bench/noise_floor.py out/validate-A.jsonl out/validate-B.jsonl [...]

Prints figures only. Datasets must measure the same suite with the same measurement code (the
statistic of `measured_time_s` changed from the median to the mean of the timed steps on 2026-11-29).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from predictor.validate_report import accuracy  # noqa: E402
from profiler.errors import UserError  # noqa: E402

from repredict import pooled_runs  # noqa: E402


def leave_one_out_accuracy(times: list[float]) -> list[float]:
    """Each time scored against the median of the others."""
    return [accuracy(statistics.median(times[:i] + times[i + 1:]), t) for i, t in enumerate(times)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("datasets", nargs="+", help="validation datasets (JSON lines) of the same suite")
    args = parser.parse_args()
    try:
        runs = pooled_runs(args.datasets)
    except UserError as err:
        print(f"noise_floor: error: {err}", file=sys.stderr)
        return 2
    by_label: dict[str, list[float]] = defaultdict(list)
    for (label, _), row in sorted(runs.items()):
        if len(row["measured_times_s"]) >= 2:
            by_label[label] += leave_one_out_accuracy(row["measured_times_s"])
    if not by_label:
        print("noise_floor: error: no run was measured in two or more of the datasets", file=sys.stderr)
        return 2
    print(f"{len(args.datasets)} dataset(s): accuracy of the other datasets' median as the prediction")
    for label, values in sorted(by_label.items()):
        print(f"  {label:18} {statistics.fmean(values):6.1%}  ({len(values)} run measurements)")
    every = [v for values in by_label.values() for v in values]
    print(f"  {'overall':18} {statistics.fmean(every):6.1%}  ({len(every)} run measurements)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
