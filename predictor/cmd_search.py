"""`predictor search`: best configurations over strategies, hybrid splits, device counts and micro-batches."""
from __future__ import annotations

import argparse
import sys

from predictor.cmd_run import load_inputs
from predictor.flags import (add_context_expert_arguments, add_overlap_arguments, add_prediction_arguments,
                             search_options)
from predictor.search_space import SEARCH_STRATEGIES
from profiler.cliutil import batch_size, int_in

#: the search evaluates every device count up to --max-gpus
MAX_SEARCH_DEVICES = 1 << 14


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_prediction_arguments(parser)
    parser.add_argument("--batch", type=batch_size, required=True, help="global mini-batch (samples per iteration)")
    parser.add_argument("--max-gpus", type=int_in(1, MAX_SEARCH_DEVICES), required=True,
                        help=f"largest device count to consider (every integer up to it; at most {MAX_SEARCH_DEVICES})")
    parser.add_argument("--min-gpus", type=int_in(1, MAX_SEARCH_DEVICES), default=1, help="smallest device count to consider")
    parser.add_argument("--objective", default="time", choices=("time", "cost"),
                        help="time = iteration seconds; cost = device-seconds per sample (GPU-hours)")
    parser.add_argument("--top", type=int_in(1, 10000), default=10, help="how many configurations to show")
    parser.add_argument("--family", action="append", choices=SEARCH_STRATEGIES, metavar="NAME",
                        help="search only this family of plans (repeatable): " + ", ".join(SEARCH_STRATEGIES)
                             + "; its data-parallel hybrids come with it (default: every one)")
    add_context_expert_arguments(parser, search=True)
    add_overlap_arguments(parser, search=True)
    parser.add_argument("--wide", action="store_true",
                        help="every column of every plan (compute, communication, bubble, update, max batch, ...), "
                             "the memory table and the out-of-core comparison; default: a table of at most 100 "
                             "columns and the best plan's line")


def run(args) -> int:
    from rich.console import Console

    from predictor.host_bound import mark_host_bound
    from predictor.outofcore_strategies import swap_vs_model_parallel
    from predictor.report import memory_table, moe_context_lines, ranked_table, to_json
    from predictor.search import search
    from predictor.stacks import stack_scaled

    graph, cm, path = load_inputs(args)
    cm = stack_scaled(cm, args.stack)  # every plan runs under --stack (predictor.stacks)
    result = search(graph, cm, batch=args.batch, max_devices=args.max_gpus, min_devices=args.min_gpus,
                    memory_cap_bytes=args.memory_cap * 1e9 if args.memory_cap else None,
                    objective=args.objective, top=args.top, context_parallel=args.context_parallel,
                    expert_parallel=args.expert_parallel, expert_tensor_parallel=args.expert_tensor_parallel,
                    **search_options(args),
                    strategies=tuple(dict.fromkeys(args.family or SEARCH_STRATEGIES)))
    mark_host_bound(result.best, graph, cm)  # the shown plans' host share: 'host dispatch' where it binds
    summary = {"profile": str(path), "profile_provenance": cm.provenance, "model": graph.name, "batch": args.batch,
               "max_gpus": args.max_gpus, "objective": args.objective, "evaluated": result.evaluated,
               "feasible": result.feasible, "fitting": result.fitting, "pruned": result.pruned,
               "seconds": result.seconds,
               "cpu_seconds": result.cpu_seconds, "plans_per_s": result.plans_per_s,
               "swap_vs_model_parallel": swap_vs_model_parallel(result.best_by_strategy)}
    if args.json:
        print(to_json(result.best, summary, args.dataset_size))
        return 0
    if not args.wide:
        return _print_compact(args, result, graph, cm, path)
    console = Console(width=max(Console().width, 280), file=sys.stdout)
    console.print(f"profile: {path} ({cm.provenance})   model: {graph.name}   batch {args.batch}, "
                  f"{args.min_gpus}..{args.max_gpus} devices, objective {args.objective}")
    console.print(evaluated_line(result))
    if not result.best:
        console.print("no configuration fits; raise --memory-cap or lower --batch")
        return 1
    console.print(ranked_table(result.best, args.dataset_size, title=f"best {len(result.best)} by {args.objective}"))
    for line in moe_context_lines(result.best[0]):  # the top plan's experts and context split, when it has them
        console.print(line)
    console.print(memory_table(result.best[0]))
    console.print(swap_vs_model_parallel(result.best_by_strategy))  # out-of-core section of the README
    return 0


def evaluated_line(result) -> str:
    """What the search evaluated and how fast, one line (both outputs)."""
    return (f"evaluated {result.evaluated} plans ({result.feasible} feasible, {result.fitting} fit in memory; "
            f"{result.pruned} more pruned by bounds) in {result.seconds:.2f} s = {result.plans_per_s:,.0f} plans/s")


def _print_compact(args, result, graph, cm, path) -> int:
    """The default output: what was searched, a table of at most 100 columns (predictor.report.compact_table with
    the device count), the best plan's line and, for a mixture of experts or context parallelism, its split."""
    from rich.console import Console

    from predictor.cmd_run import console_width
    from predictor.host_bound import host_line
    from predictor.report import compact_table, moe_context_lines

    console = Console(width=console_width(), file=sys.stdout, highlight=False)
    console.print(f"{graph.name} ({graph.params / 1e6:.2f} M params), batch {args.batch}, "
                  f"{args.min_gpus}..{args.max_gpus} devices, objective {args.objective}; profile {path.name} "
                  f"({cm.provenance})")
    console.print(evaluated_line(result))
    if not result.best:
        console.print("no configuration fits; raise --memory-cap or lower --batch")
        return 1
    console.print(compact_table(result.best, args.dataset_size, title=f"best {len(result.best)} by {args.objective}",
                                devices=True))
    best = result.best[0]
    console.print(f"best: {best.plan.strategy} ({best.plan.describe()}) on {best.plan.devices} devices, "
                  f"{best.iteration_s:.4g} s/iteration, {best.throughput_samples_per_s:,.4g} samples/s, bottleneck: "
                  f"{best.bottleneck}" + ("" if best.fits else "  (does NOT fit in memory)"))
    if line := host_line(best):
        console.print(line)
    for line in moe_context_lines(best):
        console.print(line)
    console.print("--wide: every term of every plan, the memory table and swap against model parallelism; "
                  "--json: every field")
    return 0
