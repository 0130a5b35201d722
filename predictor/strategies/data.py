"""Serial and data parallelism (ParaDL tech report Table III; docs/method.md §9).

Each of p_data replicas runs the whole model on b = B/p_data samples; gradients are allreduced over the
replicas in DDP buckets overlapped with backward. Departures from ParaDL: compute is costed at the local
batch b (not total/p); the update (optimizer-dependent) and optimizer state are included; the allreduce
overlaps backward (overlap.py); the group's node span comes from devices_per_node (layout.py).

DDP (the ddp regime only) also synchronises the module buffers before every forward (`broadcast_buffers`): one
allreduce of a rank index to agree on the source rank, then a coalesced broadcast of the buffers, one
per dtype: the batch-norm running mean and variance (2·C fp32 per BN layer) and their int64 step
counters. A model without batch norm has no buffers and skips it. These blocking collectives are
reported under layer_collective; ParaDL omits them.
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


def ddp_buffer_sync_s(ctx: Context, group: int, nodes: int) -> float:
    """DDP's buffer synchronisation before each forward over `group` replicas (module docstring)."""
    bn_channels = [layer.channels_in for layer in ctx.layers if layer.op == "batchnorm"]
    if group <= 1 or not bn_channels:
        return 0.0
    return (ctx.collective("allreduce", 8, group, nodes)
            + ctx.collective("broadcast", 2 * 4 * sum(bn_channels), group, nodes)
            + ctx.collective("broadcast", 8 * len(bn_channels), group, nodes))


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    b = local_batch(plan)
    split = Split(b)
    everything = range(ctx.n_layers)
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("all", split), everything, lambda i: split)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd
    pred.update_s = ctx.update_s(ctx.total_params, plan.optimizer, plan.dtype)
    nodes = data_nodes(plan.p_data, 1, plan.devices_per_node)
    exposed, hidden = ctx.gradient_sync(everything, bwd_list, 1, plan.p_data, nodes, plan.bucket_bytes,
                                        plan.framework)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    buffer_sync_s = 0.0 if plan.framework != "ddp" else ctx.cached(
        ("ddp-buffers", plan.p_data, nodes), lambda: ddp_buffer_sync_s(ctx, plan.p_data, nodes))
    pred.comm_exposed_s["layer_collective"] = buffer_sync_s
    pred.details["ddp_buffer_sync_s"] = buffer_sync_s
    ctx.set_parameters(pred, ctx.total_params, plan, plan.p_data)
    pred.activations_bytes = b * ctx.saved_bytes_per_sample(plan.dtype, "all", lambda t: 1.0)
    pred.workspace_bytes = b * ctx.workspace_per_sample(plan.dtype, "all", lambda t: 1.0, lambda i: 1.0)
    pred.details["nodes_data_group"] = nodes
