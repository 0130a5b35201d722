"""Search speed: `predictor search` over ResNet-50, every strategy and hybrid split, 1..4096 devices,
every micro-batch count; prints plans evaluated per second (target >= 10,000/s on one core) and the total.

    python bench/bench_search.py                      # shipped V100 reference profile, batch 4096, 1..4096
    python bench/bench_search.py --max-gpus 512 --profile profiles/<yours>.yaml

Runs on one core (torch threads = 1); the first plans of each shape pay for cost-model calls, later ones
hit the caches, so the rate grows with the search size.
"""
from __future__ import annotations

import argparse
import platform
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="profile YAML (default: the shipped reference profile)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=4096, help="global mini-batch")
    parser.add_argument("--max-gpus", type=int, default=4096)
    args = parser.parse_args()
    torch.set_num_threads(1)

    from predictor.api import load_cost_model, load_model
    from predictor.search import search

    t0 = time.perf_counter()
    graph = load_model(args.model)
    cm, path = load_cost_model(args.profile)
    setup_s = time.perf_counter() - t0
    result = search(graph, cm, batch=args.batch, max_devices=args.max_gpus, top=5)
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, 1 thread")
    print(f"profile: {path}; model {args.model} ({len(graph.layers)} layers); batch {args.batch}; "
          f"devices 1..{args.max_gpus}; setup (trace + profile) {setup_s:.1f} s")
    print(f"plans evaluated: {result.evaluated} ({result.feasible} feasible, {result.fitting} fit)")
    print(f"search time: {result.seconds:.1f} s wall, {result.cpu_seconds:.1f} s CPU  ->  "
          f"{result.plans_per_cpu_s:,.0f} plans per CPU-second ({result.plans_per_s:,.0f} per wall second); "
          f"target >= 10,000/s")
    for k, pred in enumerate(result.best, 1):
        print(f"  {k}. {pred.plan.strategy:18s} {pred.plan.describe():16s} on {pred.plan.devices:5d} devices: "
              f"{pred.iteration_s * 1e3:8.2f} ms/iteration, {pred.memory_bytes / 1e9:6.2f} GB, {pred.bottleneck}")


if __name__ == "__main__":
    main()
