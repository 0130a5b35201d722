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

from predictor.shape_recorder import RecordingCostModel, measurable_shapes
from profiler.cliutil import MAX_LOCAL_RANKS, batch_size, device_count, int_in
from profiler.errors import UserError
from profiler.outputs import check_output, write_atomic


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from predictor.cmd_run import STRATEGY_CHOICES

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--suite", help="built-in validation suite name or suite YAML: the shapes of its runs")
    source.add_argument("--model", help="a model, as for `predictor run` (with --batch and --gpus)")
    parser.add_argument("--out", required=True, help="shapes YAML to write")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument("--profile", help="profile whose costs choose the plans (pipeline cuts, micro-batches; "
                                          "default: the shipped reference profile)")
    parser.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE", help="zoo/callable knob")
    parser.add_argument("--input-shape", help="per-sample input shape for user modules, e.g. 3,224,224")
    parser.add_argument("--batch", type=batch_size, help="global mini-batch (with --model)")
    parser.add_argument("--gpus", type=device_count, help="number of devices (with --model)")
    parser.add_argument("--gpus-per-node", type=int_in(1, MAX_LOCAL_RANKS), help="devices per node (default: the profile's)")
    parser.add_argument("--strategy", default="all", choices=STRATEGY_CHOICES, help="with --model (default: all)")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--optimizer", default="sgd", choices=("sgd", "momentum", "adam"))
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
