"""`predictor scale`: how one model scales over a range of device counts, per strategy and/or the search's best
plan at each count: iteration time with its interval, samples/s, scaling efficiency, memory per device,
bottleneck (and with --dataset-size the time and cost to train); where efficiency drops below a threshold and
where the fastest strategy changes; --plot draws the curves (predictor.scaling, predictor.scale_plot)."""
from __future__ import annotations

import argparse
import json
import sys

from predictor.cmd_run import console_width, load_inputs
from predictor.flags import add_prediction_arguments
from predictor.plan import ALL_STRATEGIES
from predictor.scaling import BEST, DEFAULT_EFFICIENCY_THRESHOLD, MAX_POINTS, parse_gpus
from profiler.cliutil import MAX_BATCH, MAX_DEVICES, batch_size, float_in
from profiler.errors import UserError

SCALE_STRATEGIES = (BEST,) + ALL_STRATEGIES
DEFAULT_LINES = (BEST, "data")
PLOT_SUFFIXES = (".png", ".svg")


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags `predictor scale` and `predictor report` share: the batch, the device counts, the lines."""
    add_prediction_arguments(parser)
    batch = parser.add_mutually_exclusive_group(required=True)
    batch.add_argument("--batch-per-gpu", type=batch_size, metavar="B",
                       help="weak scaling: samples per device per iteration (global batch = B x devices)")
    batch.add_argument("--batch", type=batch_size, help="strong scaling: the global mini-batch at every count")
    parser.add_argument("--gpus", dest="gpu_counts", default="1-1024", metavar="COUNTS",
                        help="device counts: a list (1,2,4,8), a range of powers of two (1-1024, the default) or "
                             f"both (1,3,8-64); at most {MAX_POINTS} counts")
    parser.add_argument("--strategy", action="append", choices=SCALE_STRATEGIES, metavar="NAME",
                        help=f"a line to sweep, repeatable: '{BEST}' (the search's fastest fitting plan at each "
                             f"count) or a strategy ({', '.join(ALL_STRATEGIES)}); default: {' and '.join(DEFAULT_LINES)}")
    parser.add_argument("--efficiency-threshold", type=float_in(0.0, 1.0), default=DEFAULT_EFFICIENCY_THRESHOLD,
                        metavar="E", help="report the first count whose scaling efficiency is below E (default 0.8)")
    parser.add_argument("--epochs", type=float_in(0.0, 1e6), default=1.0,
                        help="with --dataset-size: passes over the data set to train (default 1)")
    parser.add_argument("--gpu-hour-cost", type=float_in(0.0, 1e9, low_open=False), metavar="PRICE",
                        help="with --dataset-size: price of one device-hour, for the cost to train")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_sweep_arguments(parser)
    parser.add_argument("--plot", metavar="FILE", help="draw throughput and efficiency against devices (.png or .svg)")
    parser.add_argument("--force", action="store_true", help="overwrite --plot if it exists")


def run_sweep(args):
    """(sweep, graph, cost model, profile path) from the shared flags; every flag checked before any prediction."""
    from predictor.scaling import sweep

    counts = parse_gpus(args.gpu_counts, MAX_DEVICES)
    if args.batch_per_gpu is not None and args.batch_per_gpu * counts[-1] > MAX_BATCH:
        raise UserError(f"--batch-per-gpu {args.batch_per_gpu} x --gpus {counts[-1]} is a global batch above "
                        f"{MAX_BATCH}")
    per_node = args.gpus_per_node
    if per_node:
        odd = [p for p in counts if p > per_node and p % per_node]
        if odd:
            raise UserError(f"--gpus {odd[0]} is not a whole number of nodes of --gpus-per-node {per_node}")
    if (args.epochs != 1.0 or args.gpu_hour_cost is not None) and not args.dataset_size:
        raise UserError("--epochs and --gpu-hour-cost need --dataset-size (samples per epoch)")
    graph, cm, path = load_inputs(args)
    result = sweep(graph, cm, counts, strategies=tuple(args.strategy or DEFAULT_LINES),
                   batch_per_device=args.batch_per_gpu, batch=args.batch, devices_per_node=per_node,
                   dtype=args.dtype, optimizer=args.optimizer,
                   memory_cap_bytes=args.memory_cap * 1e9 if args.memory_cap else None, framework=args.framework,
                   synthetic_data=args.synthetic_data, stack=args.stack, threshold=args.efficiency_threshold,
                   memory_format=args.memory_format, cross_entropy=args.cross_entropy, bn_group=args.bn_group,
                   cuda_graphs=args.cuda_graphs)
    return result, graph, cm, path


def run(args) -> int:
    from predictor.report import finite_json

    if args.plot:
        from profiler.outputs import check_output
        check_output(args.plot, "--plot", args.force, PLOT_SUFFIXES)
    result, graph, cm, path = run_sweep(args)
    if args.plot:
        from predictor.scale_plot import save_scaling_plot
        save_scaling_plot(result, args.plot, title=f"{graph.name} on {path.name}")
    if args.json:
        doc = {"profile": str(path), "profile_provenance": cm.provenance, "params": graph.params,
               **result.to_dict(args.dataset_size, args.epochs, args.gpu_hour_cost), "plot": args.plot}
        print(json.dumps(finite_json(doc), indent=1, default=str, allow_nan=False))
        return 0
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from predictor.scale_table import findings, table

    header, rows = table(result, args.dataset_size, args.epochs, args.gpu_hour_cost)
    needed = sum(max(len(cell) for cell in column) for column in zip(header, *rows)) + 2 * len(header)
    console = Console(width=max(console_width(), needed), file=sys.stdout, highlight=False)  # no cell cut
    scaling = (f"weak scaling, {result.batch_per_device} samples per GPU" if result.weak
               else f"strong scaling, global batch {result.global_batch}")
    console.print(f"{graph.name} ({graph.params / 1e6:.2f} M params), {scaling}, {len(result.devices)} counts "
                  f"{result.devices[0]}..{result.devices[-1]}; profile {path.name} ({cm.provenance})")
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for col in header:
        out.add_column(col, justify="left" if col in ("line", "plan", "bottleneck") else "right", no_wrap=True,
                       overflow="ellipsis")
    per_count = len(result.lines)
    for k, row in enumerate(rows):
        first = k % per_count == 0
        out.add_row(*([row[0] if first else ""] + row[1:]))
    console.print(out)
    for line in findings(result):
        console.print(line)
    if args.plot:
        console.print(f"plot: {args.plot}")
    return 0
