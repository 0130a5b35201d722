"""`python -m tests.fuzz [--cases N] [--seed S] [--subprocess K] [--timeout T] [--only PREFIX]`: run fuzz cases
and print every failure; exit 1 when any case fails."""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from . import RANDOM_COEFFICIENTS, all_cases, sample
from .core import run_in_process, run_subprocess


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split(":", 1)[1])
    parser.add_argument("--cases", type=int, default=0, help="how many cases (default: the whole pool; more than the "
                                                            "pool adds random coefficient mutations)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subprocess", type=int, default=0, metavar="K", help="also run K cases as subprocesses")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case in process (subprocesses: 3x)")
    parser.add_argument("--only", default="", help="only cases whose id starts with this")
    parser.add_argument("--list", action="store_true", help="print the case ids and exit")
    parser.add_argument("--verbose", action="store_true", help="print every case's error line, not only failures")
    args = parser.parse_args(argv)
    pool = all_cases(args.seed)
    if args.cases > len(pool):
        pool = all_cases(args.seed, RANDOM_COEFFICIENTS + args.cases - len(pool))
    cases = [c for c in sample(pool, args.cases or len(pool), args.seed) if c.id.startswith(args.only)]
    if args.list:
        print("\n".join(c.id for c in cases))
        return 0
    results = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as root:
        for number, case in enumerate(cases):
            results.append(run_in_process(case, Path(root) / f"c{number}", args.timeout))
        picked = random.Random(args.seed).sample(cases, min(args.subprocess, len(cases)))
        for number, case in enumerate(picked):
            results.append(run_subprocess(case, Path(root) / f"s{number}", 3 * args.timeout))
    failed = [r for r in results if not r.ok]
    if args.verbose:
        for r in results:
            print(f"{'ok  ' if r.ok else 'FAIL'} {r.case.id}: {r.stderr.strip()[:300]}")
    for r in failed:
        print(f"FAIL {r.case.id} ({r.seconds:.1f} s): {'; '.join(r.problems)}")
        print(f"     stderr: {r.stderr.strip()[:400]!r}")
    kinds = Counter(p.split(":")[0].split(" ")[0] for r in failed for p in r.problems)
    print(f"{len(results)} runs of {len(cases)} cases ({len(picked)} as subprocesses) in {time.perf_counter() - start:.0f} s: "
          f"{len(results) - len(failed)} passed, {len(failed)} failed {dict(kinds) if kinds else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
