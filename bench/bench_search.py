"""Search speed: plans per CPU-second of `predictor search` over ResNet-50, 1..4096 devices (target >= 100,000).

Every strategy and hybrid split, every device count up to --max-gpus and every micro-batch count; prints
plans evaluated per CPU-second and per wall second and the top plans, and records them (results/search.json).

    python -m bench search                      # shipped V100 reference profile, batch 4096, 1..4096
    python -m bench search --max-gpus 512 --profile profiles/<yours>.yaml

Runs on one core (torch threads = 1); the first plans of each shape pay for cost-model calls, later ones
hit the caches, so the rate grows with the search size: compare figures only at the same flags.
"""
from __future__ import annotations

import platform
import time

from bench import describe
from bench.record import Figure, add_results_flag, record
from profiler.cliutil import batch_size, device_count

NAME = "search"
TARGET_PLANS_PER_CPU_S = ">= 100000"


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--profile", help="profile YAML (default: the shipped reference profile)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=batch_size, default=4096, help="global mini-batch")
    parser.add_argument("--max-gpus", type=device_count, default=4096)
    add_results_flag(parser)


def run(args) -> int:
    import torch

    from predictor.api import load_cost_model, load_model
    from predictor.search import search

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    graph = load_model(args.model)
    cm, path = load_cost_model(args.profile)
    setup_s = time.perf_counter() - t0
    result = search(graph, cm, batch=args.batch, max_devices=args.max_gpus, top=5)
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, 1 thread")
    print(f"profile: {path}; model {args.model} ({len(graph.layers)} layers); batch {args.batch}; "
          f"devices 1..{args.max_gpus}; setup (trace + profile) {setup_s:.1f} s")
    print(f"plans evaluated: {result.evaluated} ({result.feasible} feasible, {result.fitting} fit); "
          f"{result.pruned} more pruned by bounds (not counted as evaluated)")
    print(f"search time: {result.seconds:.1f} s wall, {result.cpu_seconds:.1f} s CPU  ->  "
          f"{result.plans_per_cpu_s:,.0f} plans per CPU-second ({result.plans_per_s:,.0f} per wall second)")
    for k, pred in enumerate(result.best, 1):
        print(f"  {k}. {pred.plan.strategy:18s} {pred.plan.describe():16s} on {pred.plan.devices:5d} devices: "
              f"{pred.iteration_s * 1e3:8.2f} ms/iteration, {pred.memory_bytes / 1e9:6.2f} GB, {pred.bottleneck}")
    record(NAME, [
        Figure("plans per CPU-second", result.plans_per_cpu_s, "plans/CPU-s", TARGET_PLANS_PER_CPU_S),
        Figure("plans per wall second", result.plans_per_s, "plans/s"),
        Figure("plans evaluated", result.evaluated, "plans"),
        Figure("plans pruned by bounds", result.pruned, "plans"),
        Figure("search CPU time", result.cpu_seconds, "s"),
        Figure("search wall time", result.seconds, "s"),
    ], args.results)
    return 0
