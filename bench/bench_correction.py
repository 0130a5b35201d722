"""Held-out accuracy of the residual correction, before (analytical) and after, per strategy and overall.

    python bench/bench_correction.py                        # the newest out/validate-*.jsonl (bench_validate.py)
    python bench/bench_correction.py --runs runs.jsonl      # measured runs from `predictor validate --out`
    python bench/bench_correction.py --synthetic            # synthetic runs with a known overhead (a demo)

Grouped cross-validation exactly as `predictor train-correction` does it (whole models held out, and
whole scenarios held out; calibrate/correction.py); nothing is written. Accuracy = 1 - |t - m| / m.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from calibrate.correction import build_dataset, cross_validate, read_runs  # noqa: E402
from calibrate.correction_synthetic import synthetic_runs  # noqa: E402
from profiler.errors import UserError  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--runs", type=Path, help="runs JSONL from `predictor validate --out`")
    source.add_argument("--synthetic", action="store_true", help="synthetic runs: 1 ms overhead per collective call")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.synthetic and args.runs is None:
        found = sorted(REPO.glob("out/validate-*.jsonl"), key=lambda p: p.stat().st_mtime)
        if not found:
            print("bench_correction: error: no --runs given and no out/validate-*.jsonl (run bench/bench_validate.py)",
                  file=sys.stderr)
            return 2
        args.runs = found[-1]
    try:
        records = synthetic_runs(seed=args.seed, overhead_per_call_s=1e-3) if args.synthetic else read_runs(args.runs)[0]
        start = time.perf_counter()
        report = cross_validate(build_dataset(records), seed=args.seed)
    except UserError as err:
        print(f"bench_correction: error: {err}", file=sys.stderr)
        return 2
    elapsed_s = time.perf_counter() - start
    models = len({str(r.get("model")) for r in records})
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.node()}  "
          f"{'synthetic runs' if args.synthetic else args.runs}: {len(records)} runs, {models} models; CV took {elapsed_s:.1f} s")
    print(report.table())
    analytical, corrected, worst = report.headline
    print(f"held-out mean accuracy: analytical {analytical:.1%} -> corrected {corrected:.1%} overall "
          f"(worse CV scheme); worst strategy after correction {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
