"""How much of a plan's step its host adds: the per-layer host floor (docs/method.md §3d) is the one term a step
replayed as CUDA graphs does not pay (Plan.cuda_graphs), so the same plan predicted with and without it gives the
step time the host's dispatch adds, through compute, recomputation and pipeline bubbles alike. Where that is the
largest term the plan's bottleneck is `host dispatch` (Prediction.details["host_dispatch_s"], plan.bottleneck_label):
small per-GPU work, many tensor-parallel ranks, a framework that issues many kernels per layer.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from predictor.plan import Prediction, bottleneck_label


def mark_host_bound(preds: Sequence[Prediction], graph, cost_model) -> None:
    """Set details["host_dispatch_s"] (seconds the host floor adds to the step) and ["cuda_graphs_iteration_s"] on
    every feasible prediction whose plan issues its kernels from the host, and relabel its bottleneck; nothing on a
    profile without a host floor (a CPU profile) or a plan already replayed as CUDA graphs."""
    from predictor.api import predict

    floor = getattr(cost_model, "host_dispatch_s", None)
    if floor is None or floor("fwd") <= 0.0:
        return
    for pred in preds:
        if not pred.feasible or pred.plan.cuda_graphs:
            continue
        graphs = predict(graph, replace(pred.plan, cuda_graphs=True), cost_model, interval=False,
                         device_memory_bytes=pred.device_memory_bytes)
        pred.details["cuda_graphs_iteration_s"] = graphs.iteration_s
        pred.details["host_dispatch_s"] = max(0.0, pred.iteration_s - graphs.iteration_s)
        pred.bottleneck = bottleneck_label(pred)


def host_line(pred: Prediction) -> str:
    """One line for a plan whose host adds a tenth of its step or more (empty otherwise)."""
    added = pred.details.get("host_dispatch_s", 0.0)
    if not pred.feasible or added < 0.1 * pred.iteration_s:
        return ""
    plan = pred.plan
    helps = ["larger micro-batches" if plan.micro_batches > 1 else "more samples per device"]
    if plan.p_tensor > 1:
        helps.append("fewer tensor ranks")
    return (f"host dispatch: the host issues this plan's kernels slower than they run, {added:.4g} s of its "
            f"{pred.iteration_s:.4g} s step; replayed as CUDA graphs (--cuda-graphs) "
            f"{pred.details['cuda_graphs_iteration_s']:.4g} s; {' or '.join(helps)} also help")
