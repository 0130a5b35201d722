"""`predictor shapes`: write the compute shapes a model's predictions cost, for `profiler calibrate --shapes`.

    predictor shapes --model vgg16 --batch 64 --gpus 4 --out shapes.yaml      # every strategy
    predictor shapes --suite cpu_default --out shapes.yaml                    # every run of a validation suite
    profiler calibrate --quick --shapes shapes.yaml --out profiles/this.yaml

The profile then costs these shapes by their measured times (calibrate.fit.measured_shapes), as ParaDL and
its peers cost a model from its own profiled layers, and every other shape by the fitted models.
"""
from __future__ import annotations

import argparse

import yaml

from calibrate.profile_arguments import add_profile_argument
from predictor.flags import (add_dtype_argument, add_gpus_per_node_argument, add_model_arguments, add_optimizer_argument,
                             add_strategy_argument)
from predictor.shape_recorder import RecordingCostModel, measurable_shapes
from profiler.cliutil import batch_size, device_count
from profiler.errors import UserError
from profiler.outputs import check_output, write_atomic


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--suite", help="built-in validation suite name or suite YAML: the shapes of its runs")
    add_model_arguments(parser, required=False, model_group=source, model_note=" (with --batch and --gpus)",
                        note=" (with --model)")
    parser.add_argument("--out", required=True, help="shapes YAML to write")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    add_profile_argument(parser, "profile whose costs choose the plans (pipeline cuts, micro-batches; default: the "
                                 "shipped reference profile)")
    parser.add_argument("--batch", type=batch_size, help="global mini-batch (with --model)")
    parser.add_argument("--gpus", type=device_count, help="number of devices (with --model)")
    add_gpus_per_node_argument(parser)
    add_strategy_argument(parser, note=" (with --model)")
    add_dtype_argument(parser)
    add_optimizer_argument(parser)
    parser.set_defaults(memory_cap=None)


def record_suite(suite_name: str, cost_model) -> set:
    from predictor.cmd_validate import predict_suite
    from predictor.runner.suite import load_suite

    recorder = RecordingCostModel(cost_model)
    predict_suite(load_suite(suite_name), recorder)
    return recorder.calls


def record_model(args, cost_model) -> set:
    from predictor.api import predict_all
    from predictor.cmd_run import load_inputs
    from predictor.plan import ADDON_STRATEGIES, STRATEGIES

    if args.batch is None or args.gpus is None:
        raise UserError("--model needs --batch and --gpus")
    graph, _, _ = load_inputs(args)
    recorder = RecordingCostModel(cost_model)
    strategies = STRATEGIES + ADDON_STRATEGIES if args.strategy == "all" else (args.strategy,)
    predict_all(graph, args.batch, args.gpus, recorder, strategies=strategies, devices_per_node=args.gpus_per_node,
                dtype=args.dtype, optimizer=args.optimizer, interval=False)
    return recorder.calls


def run(args) -> int:
    from predictor.api import load_cost_model

    check_output(args.out, "--out", args.force, (".yaml", ".yml"))
    cost_model, path = load_cost_model(args.profile)
    calls = record_suite(args.suite, cost_model) if args.suite else record_model(args, cost_model)
    entries = measurable_shapes(calls)
    if not entries:
        raise UserError("no measurable compute shape was costed (every strategy infeasible?)")
    source = f"suite {args.suite}" if args.suite else f"model {args.model}, batch {args.batch}, {args.gpus} devices"
    text = f"# predictor shapes: {source}; plans costed with {path}\n" + yaml.safe_dump(
        {"shapes": entries}, sort_keys=False, default_flow_style=None, width=200)
    write_atomic(args.out, text)
    print(f"wrote {args.out}: {len(entries)} shapes from {len(calls)} costed calls ({source})")
    return 0
