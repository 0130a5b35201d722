"""Latency of one GPT-3 175B prediction in process: milliseconds warm (target <= 50 ms) and for the first plan.

Times `predictor.api.predict` as a program calls it, on a graph and a profile already loaded: GPT-3 175B on 1536
A100s, t8 p16, batch 1536, micro-batch 1, 1F1B with recompute (Narayanan et al. 2021, Table 1), with its interval
(three evaluations, each in a Context of its own). warm: the same call again (what a graph alone decides kept:
strategies.context.GraphStructure); first: the first prediction after the graph is loaded, on a new copy of the
graph each time. Figures are medians over --repeats (results/llm-latency.json).

    python -m bench llm-latency [--repeats 20] [--profile a100-40gb-4hdr-8gpu.published]
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace

from bench import describe
from bench.record import Figure, add_results_flag, record
from profiler.cliutil import int_in

NAME = "llm-latency"
TARGET_WARM_MS = "<= 50"
GPT3_175B = {"layers": 96, "hidden": 12288, "heads": 96, "seq": 2048, "vocab": 51200}


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--repeats", type=int_in(1, 1000), default=20, help="timed predictions per case (default 20)")
    parser.add_argument("--profile", default="a100-40gb-4hdr-8gpu.published",
                        help="profile (default a100-40gb-4hdr-8gpu.published: the 40 GB DGX A100 cluster)")
    add_results_flag(parser)


def plan_175b(devices_per_node: int):
    from predictor.plan import Plan

    return Plan("data+tensor+pipeline", batch=1536, devices=1536, devices_per_node=devices_per_node, p_data=12,
                p_tensor=8, stages=16, micro_batches=128, dtype="fp16", optimizer="adam", recompute=True,
                schedule="1f1b")


def run(args) -> int:
    from predictor.api import load_cost_model, load_model, predict

    cm, path = load_cost_model(args.profile)
    graph = load_model("gpt", **GPT3_175B)
    plan = plan_175b(cm.devices_per_node)
    first, warm = [], []
    for _ in range(args.repeats):
        fresh = replace(graph)  # a new graph object: nothing of the last one's structure is reused
        start = time.perf_counter()
        pred = predict(fresh, plan, cm)
        first.append(time.perf_counter() - start)
    for _ in range(args.repeats):
        start = time.perf_counter()
        pred = predict(graph, plan, cm)
        warm.append(time.perf_counter() - start)
    print(f"GPT-3 175B ({len(graph.layers)} layers), {plan.describe()} on {path.name}: "
          f"{pred.iteration_s:.3f} s per iteration, {pred.memory_bytes / 2**30:.2f} GiB per device")
    for label, values in (("first", first), ("warm", warm)):
        print(f"  {label}: median {1e3 * statistics.median(values):.1f} ms over {len(values)} "
              f"(min {1e3 * min(values):.1f}, max {1e3 * max(values):.1f})")
    record(NAME, [Figure("one 175B prediction with its interval, warm (median)", 1e3 * statistics.median(warm), "ms",
                         TARGET_WARM_MS),
                  Figure("the first prediction on a newly loaded graph (median)", 1e3 * statistics.median(first),
                         "ms")], args.results)
    return 0
