"""Out-of-core vs model parallelism: predicted iteration time of each strategy as the batch outgrows the device.

When does swapping beat model parallelism? Predicted iteration time of each answer for a model that
outgrows the device as the batch grows: data parallelism, its checkpointed form, the out-of-core planner
(optimizer on the host and on the device), GPipe with re-materialisation and cooperative processes, each
at its best micro-batch count. Pure model evaluation on a profile (no timing); prints a table, records nothing.

    python -m bench outofcore                                   # ResNet-50 and VGG16, 4 devices, V100 ABCI
    python -m bench outofcore --model inception_v3 --devices 8 --profile v100-dgx1-8gpu.published
"""
from __future__ import annotations

from bench import describe
from predictor.api import default_plans, load_cost_model, load_model
from predictor.outofcore_strategies import swap_vs_model_parallel
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from profiler.cliutil import device_count
from profiler.errors import UserError

STRATEGIES = ("data", "data+recompute", "outofcore", "pipeline", "cooperative")


def best_per_strategy(ctx, graph, batch, devices, devices_per_node, optimizer):
    """strategy -> the fastest fitting prediction (pipeline with re-materialisation), or None."""
    out = {}
    for name in STRATEGIES:
        plans = default_plans(graph, name, batch, devices, devices_per_node, optimizer=optimizer)
        if name == "pipeline":
            plans = [p.__class__(**{**p.__dict__, "recompute": True}) for p in plans]
        preds = [evaluate(ctx, p) for p in plans]
        fitting = [p for p in preds if p.feasible and p.fits]
        out[name] = min(fitting, key=lambda p: p.iteration_s, default=None)
    return out


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--profile", help="profile YAML (default: the shipped V100 reference)")
    parser.add_argument("--model", action="append", help="zoo model (repeatable; default resnet50 and vgg16)")
    parser.add_argument("--devices", type=device_count, default=4)
    parser.add_argument("--per-device", default="32,64,128,256,512", help="samples per device to sweep")
    parser.add_argument("--optimizer", default="adam", choices=("sgd", "momentum", "adam"))


def run(args) -> int:
    try:
        per_device = [int(b) for b in args.per_device.split(",")]
    except ValueError:
        raise UserError(f"--per-device: expected integers separated by commas, got {args.per_device[:60]!r}") from None
    if any(not 1 <= b <= 1 << 20 for b in per_device):
        raise UserError("--per-device: each count must be in 1..2^20")
    cm, path = load_cost_model(args.profile)
    dpn = min(args.devices, cm.devices_per_node)
    print(f"profile {path}; {args.devices} devices ({dpn} per node); optimizer {args.optimizer}; "
          f"iteration ms of the fastest fitting plan per strategy ('-' = nothing fits)")
    print(f"{'model':13} {'batch':>6} " + " ".join(f"{name:>15}" for name in STRATEGIES))
    for model in args.model or ["resnet50", "vgg16"]:
        graph = load_model(model)
        ctx = Context(graph, cm)
        for samples in per_device:
            batch = samples * args.devices
            best = best_per_strategy(ctx, graph, batch, args.devices, dpn, args.optimizer)
            cells = [f"{best[n].iteration_s * 1e3:15.1f}" if best[n] else f"{'-':>15}" for n in STRATEGIES]
            print(f"{model:13} {batch:>6} " + " ".join(cells))
            print(f"{'':21}{swap_vs_model_parallel({n: p for n, p in best.items() if p})}")
    return 0
