"""Serial and data parallelism (strategies.md §3 "Serial", "Data").

Each of p_data replicas runs the whole model on b = B/p_data samples; gradients are allreduced over the
replicas in DDP buckets overlapped with backward. Departures from ParaDL: compute is costed at the local
batch b (not total/p); the update (optimizer-dependent) and optimizer state are included; the allreduce
overlaps backward (overlap.py); the group's node span comes from devices_per_node (layout.py).
"""
from __future__ import annotations

from predictor.layercost import Split
from predictor.layout import data_nodes
from predictor.plan import Plan, Prediction
from predictor.strategies.context import Context, Infeasible


def local_batch(plan: Plan) -> int:
    if plan.batch % plan.p_data:
        raise Infeasible(f"batch {plan.batch} not divisible by {plan.p_data} data-parallel replicas")
    return plan.batch // plan.p_data


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    b = local_batch(plan)
    split = Split(b)
    everything = range(ctx.n_layers)
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("all", split), everything, lambda i: split)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd
    pred.update_s = ctx.update_s(ctx.total_params, plan.optimizer, plan.dtype)
    nodes = data_nodes(plan.p_data, 1, plan.devices_per_node)
    exposed, hidden = ctx.gradient_sync(everything, bwd_list, 1, plan.p_data, nodes, plan.bucket_bytes)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    ctx.set_parameters(pred, ctx.total_params, plan, plan.p_data)
    pred.activations_bytes = b * ctx.saved_bytes_per_sample(plan.dtype, "all", lambda t: 1.0)
    pred.workspace_bytes = b * ctx.workspace_per_sample(plan.dtype, "all", lambda t: 1.0, lambda i: 1.0)
    pred.details["nodes_data_group"] = nodes
