"""Measure cooperative-process training against the GPipe pipeline on local ranks, next to the predictions.

Both run through the validation runner's measurement loop (predictor/runner/measure.py) on `--ranks`
processes (gloo on CPU, NCCL on GPUs), with the stage cut the predictor chose. The runner's GPipe keeps
its activations (no re-materialisation), so its prediction is the `pipeline` strategy with recompute off.
Figures are printed, not asserted; on a shared machine they are noisy (the lead re-runs on a quiet one).

    python -m bench measure-cooperative --profile PROFILE.yaml
    python -m bench measure-cooperative --profile P.yaml --model resnet --model-arg width=8 --batch 16 --micro-batches 2,4
"""
from __future__ import annotations

from bench import describe
from predictor.api import load_cost_model, load_model, predict
from predictor.plan import Plan
from predictor.runner.launch import spawn_ranks
from profiler.cliutil import batch_size, int_in, rank_count, thread_count
from profiler.errors import UserError

DEFAULT_KNOBS = {"vgg16": {"width": 4, "fc": 64, "image": 32, "num_classes": 10}}


def _rank(rank, world, device, emit, graph, scheme, micro_batches, graph_starts, batch, iterations, warmup):
    import torch.distributed as dist

    from predictor.runner.cooperative import CooperativeReplica
    from predictor.runner.measure import measure
    from predictor.runner.nets import build_serial, synthetic_batch
    from predictor.runner.pipeline import PipelineReplica

    layers, modules = build_serial(graph, seed=0)
    kind = CooperativeReplica if scheme == "cooperative" else PipelineReplica
    replica = kind(layers, modules, dist.group.WORLD, world, micro_batches, graph_starts, graph)
    x, y = replica.local_batch(*synthetic_batch(graph, batch, seed=1, device=device))
    result = measure(replica, x, y, device=device, warmup=warmup, iterations=iterations)
    if rank == 0:
        emit(result)


def _knobs(pairs: list[str], model: str) -> dict:
    knobs = dict(DEFAULT_KNOBS.get(model, {}))
    for pair in pairs:
        key, _, value = pair.partition("=")
        knobs[key] = int(value) if value.lstrip("-").isdigit() else value
    return knobs


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--profile", help="profile YAML calibrated on this machine (default: the shipped reference)")
    parser.add_argument("--model", default="vgg16")
    parser.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--batch", type=batch_size, default=16)
    parser.add_argument("--ranks", type=rank_count, default=2)
    parser.add_argument("--micro-batches", default="2,4", help="comma-separated micro-batch counts")
    parser.add_argument("--iterations", type=int_in(1, 100000), default=5)
    parser.add_argument("--warmup", type=int_in(0, 100000), default=2)
    parser.add_argument("--threads", type=thread_count, default=1, help="threads per rank")


def run(args) -> int:
    try:
        counts = [int(m) for m in args.micro_batches.split(",")]
    except ValueError:
        raise UserError(f"--micro-batches: expected integers separated by commas, got {args.micro_batches[:60]!r}") from None
    if any(not 1 <= m <= args.batch for m in counts):
        raise UserError(f"--micro-batches: each count must be in 1..{args.batch} (the batch)")
    graph = load_model(args.model, **_knobs(args.model_arg, args.model))
    cost_model, path = load_cost_model(args.profile)
    print(f"model {graph.name} ({len(graph.layers)} layers), batch {args.batch}, {args.ranks} ranks, profile {path}")
    print(f"{'scheme':12} {'M':>3} {'measured ms':>12} {'IQR ms':>8} {'predicted ms':>13} {'pred/meas':>9}")
    measured = {}
    for m in counts:
        for scheme in ("pipeline", "cooperative"):
            plan = Plan(scheme, batch=args.batch, devices=args.ranks, devices_per_node=args.ranks,
                        stages=args.ranks, micro_batches=m)
            try:
                prediction = predict(graph, plan, cost_model, interval=False)
                why = prediction.reason
            except UserError as err:  # e.g. a profile without collective coefficients: measure anyway
                prediction, why = None, f"no prediction: {err}"
            if prediction is not None and not prediction.feasible:
                print(f"{scheme:12} {m:>3} {'-':>12} {'-':>8} {'-':>13}  {why}")
                continue
            starts = tuple(int(b[0]) for b in prediction.details["stage_bounds"]) if prediction else ()
            (result,) = list(spawn_ranks(args.ranks, _rank, (graph, scheme, m, starts, args.batch, args.iterations,
                                                             args.warmup), threads=args.threads))
            t = result["measured_time_s"]
            predicted = prediction.iteration_s if prediction else float("nan")
            measured[(scheme, m)] = (t, predicted)
            print(f"{scheme:12} {m:>3} {t * 1e3:12.1f} {result['measured_iqr_s'] * 1e3:8.1f} "
                  f"{predicted * 1e3:13.1f} {predicted / t:9.2f}  {why}")
    for m in counts:
        if ("pipeline", m) in measured and ("cooperative", m) in measured:
            (tp, pp), (tc, pc) = measured[("pipeline", m)], measured[("cooperative", m)]
            print(f"M={m}: cooperative vs GPipe (no re-materialisation) measured {tp / tc - 1:+.1%}, "
                  f"predicted {pp / pc - 1:+.1%}")
    return 0
