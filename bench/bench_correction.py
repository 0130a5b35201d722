"""Held-out accuracy of the residual correction, before (analytical) and after, per strategy and overall.

    python -m bench correction                        # the newest out/validate-*.jsonl (python -m bench validate)
    python -m bench correction --runs runs.jsonl      # measured runs from `predictor validate --out`
    python -m bench correction --synthetic            # synthetic runs with a known overhead (a demo; not recorded)

Grouped cross-validation exactly as `predictor train-correction` does it (whole models held out, and
whole scenarios held out; calibrate/correction.py); nothing but the figures (results/correction.json, measured
runs only) is written. Accuracy = 1 - |t - m| / m.
"""
from __future__ import annotations

import platform
import time
from pathlib import Path

from bench import describe
from bench.record import REPO, Figure, add_results_flag, record
from calibrate.correction import build_dataset, cross_validate, read_runs
from calibrate.correction_synthetic import synthetic_runs
from profiler.cliutil import seed
from profiler.errors import UserError

NAME = "correction"


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--runs", type=Path, help="runs JSONL from `predictor validate --out`")
    source.add_argument("--synthetic", action="store_true", help="synthetic runs: 1 ms overhead per collective call")
    parser.add_argument("--seed", type=seed, default=0)
    add_results_flag(parser)


def run(args) -> int:
    if not args.synthetic and args.runs is None:
        found = sorted(REPO.glob("out/validate-*.jsonl"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise UserError("no --runs given and no out/validate-*.jsonl (run `python -m bench validate`)")
        args.runs = found[-1]
    records = synthetic_runs(seed=args.seed, overhead_per_call_s=1e-3) if args.synthetic else read_runs(args.runs)[0]
    start = time.perf_counter()
    report = cross_validate(build_dataset(records), seed=args.seed)
    elapsed_s = time.perf_counter() - start
    models = len({str(r.get("model")) for r in records})
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.node()}  "
          f"{'synthetic runs' if args.synthetic else args.runs}: {len(records)} runs, {models} models; CV took {elapsed_s:.1f} s")
    print(report.table())
    analytical, corrected, worst = report.headline
    print(f"held-out mean accuracy: analytical {analytical:.1%} -> corrected {corrected:.1%} overall "
          f"(worse CV scheme); worst strategy after correction {worst:.1%}")
    if not args.synthetic:  # a demonstration on synthetic runs is no measured figure
        record(NAME, [Figure("held-out mean accuracy, analytical", analytical * 100, "%"),
                      Figure("held-out mean accuracy, corrected", corrected * 100, "%"),
                      Figure("worst strategy after correction", worst * 100, "%"),
                      Figure("runs", len(records), "runs")], args.results)
    return 0
