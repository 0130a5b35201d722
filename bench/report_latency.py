"""Wall time of the published-run report `predictor validate --published transformer` (target <= 20 s, cold).

Times the whole command as a user runs it, interpreter start-up included. cold: a new, empty graph cache, so every
model of the corpus is traced (in worker processes, predictor.api.trace_ahead); warm: a cache one untimed run has
filled. Each case runs --repeats times; the figures are the medians (results/report-latency.json).

    python -m bench report-latency [--repeats 3] [--corpus transformer]
"""
from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench import describe
from bench.record import Figure, add_results_flag, record
from bench.run_latency import predictor_command, timed_run
from profiler.cliutil import int_in

NAME = "report-latency"
TARGETS = {"cold": "<= 20", "warm": "<= 20"}


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--repeats", type=int_in(1, 20), default=3, help="timed runs per case (default 3)")
    parser.add_argument("--corpus", default="transformer", choices=("transformer", "cnn"),
                        help="which shipped corpus the report reads (default transformer)")
    parser.add_argument("--timeout", type=int_in(1, 3600), default=600, help="seconds one run may take")
    add_results_flag(parser)


def run(args) -> int:
    command = predictor_command() + ["validate", "--published", args.corpus, "--json"]
    print(f"command: {' '.join(command)}; {args.repeats} timed runs per case")
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="report_latency_") as folder:
        warm_cache = Path(folder) / "warm"
        timed_run(command, warm_cache, args.timeout)  # fills the cache, untimed
        for k in range(args.repeats):
            times["cold"].append(timed_run(command, Path(folder) / f"cold-{k}", args.timeout))
            times["warm"].append(timed_run(command, warm_cache, args.timeout))
    for case, values in times.items():
        print(f"  {case}: " + ", ".join(f"{v:.2f}" for v in values) + f" s; median {statistics.median(values):.2f} s")
    record(NAME if args.corpus == "transformer" else f"{NAME}-{args.corpus}",
           [Figure(f"{case} wall time (median)", statistics.median(values), "s", TARGETS[case])
            for case, values in times.items()], args.results)
    return 0
