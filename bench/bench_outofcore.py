"""When does swapping beat model parallelism? Predicted iteration time of each answer for a model that
outgrows the device as the batch grows: data parallelism, its checkpointed form, the out-of-core planner
(optimizer on the host and on the device), GPipe with re-materialisation and cooperative processes, each
at its best micro-batch count. Pure model evaluation on a profile (no timing).

    python bench/bench_outofcore.py                                   # ResNet-50 and VGG16, 4 devices, V100 ABCI
    python bench/bench_outofcore.py --model inception_v3 --devices 8 --profile profiles/v100-dgx1-8gpu.published.yaml
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from predictor.api import default_plans, load_cost_model, load_model  # noqa: E402
from predictor.outofcore_strategies import swap_vs_model_parallel  # noqa: E402
from predictor.strategies import evaluate  # noqa: E402
from predictor.strategies.context import Context  # noqa: E402

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="profile YAML (default: the shipped V100 reference)")
    parser.add_argument("--model", action="append", help="zoo model (repeatable; default resnet50 and vgg16)")
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--per-device", default="32,64,128,256,512", help="samples per device to sweep")
    parser.add_argument("--optimizer", default="adam")
    args = parser.parse_args(argv)
    cm, path = load_cost_model(args.profile)
    dpn = min(args.devices, cm.devices_per_node)
    print(f"profile {path}; {args.devices} devices ({dpn} per node); optimizer {args.optimizer}; "
          f"iteration ms of the fastest fitting plan per strategy ('-' = nothing fits)")
    print(f"{'model':13} {'batch':>6} " + " ".join(f"{name:>15}" for name in STRATEGIES))
    for model in args.model or ["resnet50", "vgg16"]:
        graph = load_model(model)
        ctx = Context(graph, cm)
        for per_device in (int(b) for b in args.per_device.split(",")):
            batch = per_device * args.devices
            best = best_per_strategy(ctx, graph, batch, args.devices, dpn, args.optimizer)
            cells = [f"{best[n].iteration_s * 1e3:15.1f}" if best[n] else f"{'-':>15}" for n in STRATEGIES]
            print(f"{model:13} {batch:>6} " + " ".join(cells))
            print(f"{'':21}{swap_vs_model_parallel({n: p for n, p in best.items() if p})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
