"""Wall time of the published-run report `predictor validate --published transformer` (target <= 20 s, cold).

Times the whole command as a user runs it, interpreter start-up included. cold: a new, empty graph cache, so every
model of the corpus is traced (in worker processes, predictor.api.trace_ahead); warm: a cache one untimed run has
filled. Each case runs --repeats times; the figures are the medians (results/report-latency.json).

    python -m bench report-latency [--repeats 3]
"""
from __future__ import annotations

import statistics

from bench import describe
from bench.record import Figure, add_results_flag, record
from bench.run_latency import cold_and_warm, predictor_command
from profiler.cliutil import int_in

NAME = "report-latency"
TARGETS = {"cold": "<= 20", "warm": "<= 20"}


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--repeats", type=int_in(1, 20), default=3, help="timed runs per case (default 3)")
    parser.add_argument("--timeout", type=int_in(1, 3600), default=600, help="seconds one run may take")
    add_results_flag(parser)


def run(args) -> int:
    times = cold_and_warm(predictor_command() + ["validate", "--published", "transformer", "--json"], args.repeats,
                          args.timeout)
    record(NAME, [Figure(f"{case} wall time (median)", statistics.median(values), "s", TARGETS[case])
                  for case, values in times.items()], args.results)
    return 0
