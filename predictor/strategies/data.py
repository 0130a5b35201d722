"""Serial and data parallelism (ParaDL tech report Table III; docs/method.md §9).

Each of p_data replicas runs the whole model on b = B/p_data samples; gradients are all-reduced over the replicas
in DDP buckets overlapped with backward (overlap.py). Departures from ParaDL: compute at the local batch, the update
and optimizer state included, the group's node span from the layout; under ddp, DDP's buffer broadcast before every
forward (batch-norm statistics, reported under layer_collective; docs/decisions/2026-12-04-ddp-buffer-sync.md).
Sharded data parallelism (plan.zero_stage: ZeRO stages 1-3, stage 3 as PyTorch FSDP) keeps 1/N of the optimizer
state, then the gradients, then the weights, with reduce-scatters behind backward and all-gathers of the weights
(docs/method.md §9, "Sharded data parallelism"). Gradient accumulation (plan.micro_batches > 1): DDP and ZeRO 1
reduce once, in the last micro-batch's backward; ZeRO 2 and 3 synchronise every micro-batch (method.md §9).
"""
from __future__ import annotations

from predictor.layercost import Split
from predictor.memory import MIXED_DTYPES, gradient_bytes_per_param, parameter_bytes
from predictor.layout import data_network_share, data_nodes
from predictor.plan import ZERO_STAGES, Plan, Prediction
from predictor.strategies.bounds import Bounds
from predictor.strategies.context import Context, Infeasible


def local_batch(plan: Plan) -> int:
    if plan.batch % plan.p_data:
        raise Infeasible(f"batch {plan.batch} not divisible by {plan.p_data} data-parallel replicas")
    return plan.batch // plan.p_data


def micro_batch(plan: Plan) -> int:
    """Samples one replica runs per forward and backward: its local batch over plan.micro_batches (gradient
    accumulation; 1: the whole local batch at once)."""
    b = local_batch(plan)
    if b % plan.micro_batches:
        raise Infeasible(f"local batch {b} not divisible by {plan.micro_batches} gradient-accumulation micro-batches")
    return b // plan.micro_batches


def ddp_buffer_sync_s(ctx: Context, group: int, nodes: int) -> float:
    """DDP's buffer synchronisation before each forward over `group` replicas (module docstring)."""
    bn_channels = [layer.channels_in for layer in ctx.layers if layer.op == "batchnorm"]
    if group <= 1 or not bn_channels:
        return 0.0
    return (ctx.collective("broadcast", 2 * 4 * sum(bn_channels), group, nodes)
            + ctx.collective("broadcast", 8 * len(bn_channels), group, nodes))


def batch_norm_sync_s(ctx: Context, dtype: str, end: int, group: int, nodes: int) -> float:
    """Batch norm's statistics all-reduced over a group of `group` ranks on `nodes` nodes, for the batch-norm layers
    before layer `end`: per layer one all-reduce of 2 C + 1 values (sums, sums of squares, the count) forward before
    normalising, one of the sums of dy and dy x-hat backward; each waits on its layer (exposed). The spatial group's
    (its samples' pixels are split) and data parallelism's batch-norm groups (Plan.bn_group: PyTorch's SyncBatchNorm,
    NVIDIA's bn_group) alike; docs/method.md §9, §10."""
    def build():
        act = ctx.act_size(dtype)
        stats = [(2 * ctx.layers[i].channels_in + 1) * act for i in range(end) if ctx.layers[i].op == "batchnorm"]
        return sum(2 * ctx.collective("allreduce", size, group, nodes) for size in stats)
    return ctx.cached(("bn-sync", dtype, end, group, nodes), build) if group > 1 else 0.0


def zero3_exposure(gathers: list[float], scatter: float, fwd: float, bwd: float, k: int,
                   overlap_efficiency: float) -> tuple[float, float]:
    """(exposed_s, hidden_s) of ZeRO 3's collectives over k micro-batches (docs/method.md §9): each layer's weights
    gathered before its forward (the first exposed, the rest behind the forward F) and again before its backward,
    its gradients reduce-scattered, behind the backward B; the hidden rest slows compute by the overlap efficiency."""
    first = next((g for g in gathers if g > 0), 0.0)
    fwd_exposed = first + max(0.0, sum(gathers) - first - fwd)
    bwd_total = sum(gathers) + scatter
    exposed = k * (fwd_exposed + max(0.0, bwd_total - bwd))
    hidden = k * (sum(gathers) + bwd_total) - exposed
    slowdown = (1.0 - overlap_efficiency) * hidden  # compute slowed by the concurrent collectives
    return exposed + slowdown, hidden - slowdown


def _zero(ctx: Context, plan: Plan, pred: Prediction, fwd: float, bwd: float, bwd_list, nodes: int) -> None:
    """The terms of sharded data parallelism (module docstring) over the N = p_data replicas; fwd, bwd and bwd_list
    are one micro-batch's."""
    stage, everything = plan.zero_stage, range(ctx.n_layers)
    # HSDP (plan.shard_group): shards over S consecutive replicas, the R = p_data / S copies all-reduce their shard
    N = plan.shard_group or plan.p_data
    replicas = plan.p_data // N
    if replicas > 1:  # the gathers and reduce-scatters inside a shard group; the all-reduce across the groups
        nodes = data_nodes(N, 1, plan.devices_per_node)
        replica_nodes = data_nodes(replicas, N, plan.devices_per_node)
        replica_share = data_network_share(replicas, N, plan.devices_per_node)
    k = plan.micro_batches if stage >= 2 else 1  # reductions (and ZeRO 3's gathers) per step
    weight_bytes = 2.0 if plan.dtype in MIXED_DTYPES else 4.0  # the copy the layers compute with
    pred.update_s = ctx.update_s(ctx.total_params / N, plan.optimizer, plan.dtype, mixed_precision=plan.mixed_precision)
    weights, grads, optimizer = parameter_bytes(ctx.total_params, plan.dtype, plan.optimizer, plan.mixed_precision)
    grad_bytes = gradient_bytes_per_param(plan.dtype, plan.mixed_precision)
    master = weights - ctx.total_params * weight_bytes if plan.dtype in MIXED_DTYPES else 0.0
    pred.optimizer_bytes = optimizer / N
    pred.weights_bytes = weights / N if stage >= 3 else weights - master + master / N
    pred.grads_bytes = grads / N if stage >= 2 else grads
    pred.comm_buffers_bytes += min(grads, 2 * plan.bucket_bytes)  # reduce-scatter and gather buckets
    pred.details["params_per_device"] = ctx.total_params / N if stage >= 3 else ctx.total_params

    def gather(i: int) -> float:
        return ctx.collective("allgather", ctx.params[i] * weight_bytes, N, nodes) if ctx.params[i] else 0.0

    if stage <= 2:
        exposed, hidden = ctx.gradient_sync(everything, bwd_list, 1, N, nodes, plan, op="reduce_scatter")
        exposed, hidden = k * exposed, k * hidden
        pred.comm_exposed_s["layer_collective"] = ctx.collective("allgather", ctx.total_params * weight_bytes, N,
                                                                 nodes)
    else:
        gathers = ctx.cached(("zero3-gathers", N, nodes, weight_bytes), lambda: [gather(i) for i in everything])
        scatter = ctx.cached(("zero3-scatter", N, nodes, grad_bytes), lambda: sum(
            ctx.collective("reduce_scatter", ctx.params[i] * grad_bytes, N, nodes)
            for i in everything if ctx.params[i]))
        if replicas > 1:  # each shard's gradient all-reduced over its copies, behind backward as the scatter
            key = ("hsdp-allreduce", N, replicas, replica_nodes, replica_share, grad_bytes)
            scatter += ctx.cached(key, lambda: sum(
                ctx.collective("allreduce", ctx.params[i] * grad_bytes / N, replicas, replica_nodes, replica_share)
                for i in everything if ctx.params[i]))
        exposed, hidden = zero3_exposure(gathers, scatter, fwd, bwd, k, ctx.cm.overlap_efficiency())
        pred.comm_exposed_s["layer_collective"] = 0.0
        largest = max(ctx.params, default=0)
        pred.workspace_bytes += 2 * largest * weight_bytes  # a gathered layer and the prefetched next one
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    pred.details["zero_stage"] = stage
    if replicas > 1:
        pred.details["shard_group"] = N


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    n, k = micro_batch(plan), plan.micro_batches
    split = Split(n)
    everything = range(ctx.n_layers)
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("all", split), everything, lambda i: split)
    pred.compute_fwd_s, pred.compute_bwd_s = k * fwd, k * bwd
    pred.update_s = ctx.update_s(ctx.total_params, plan.optimizer, plan.dtype, mixed_precision=plan.mixed_precision)
    nodes = data_nodes(plan.p_data, 1, plan.devices_per_node)
    exposed, hidden = ctx.gradient_sync(everything, bwd_list, 1, plan.p_data, nodes, plan)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    buffer_sync_s = 0.0 if plan.framework != "ddp" else ctx.cached(
        ("ddp-buffers", plan.p_data, nodes), lambda: ddp_buffer_sync_s(ctx, plan.p_data, nodes))
    buffer_sync_s *= k  # before every micro-batch's forward (no_sync stops the gradients' reduction only)
    pred.comm_exposed_s["layer_collective"] = buffer_sync_s
    pred.details["ddp_buffer_sync_s"] = buffer_sync_s
    ctx.set_parameters(pred, ctx.total_params, plan, plan.p_data)
    pred.activations_bytes = n * ctx.saved_bytes_per_sample(plan.dtype, "all", lambda t: 1.0)
    pred.workspace_bytes = n * ctx.workspace_per_sample(plan.dtype, "all", lambda t: 1.0, lambda i: 1.0)
    pred.details["nodes_data_group"] = nodes
    if plan.zero_stage:
        if plan.zero_stage not in ZERO_STAGES:
            raise Infeasible(f"ZeRO stage {plan.zero_stage}: known stages are {', '.join(map(str, ZERO_STAGES))}")
        if plan.p_data > 1:
            pred.comm_buffers_bytes = 0.0  # no DDP bucket copy: _zero sets its own buckets
            _zero(ctx, plan, pred, fwd, bwd, bwd_list, nodes)
    if plan.bn_group > 1:  # synchronised batch norm over groups of replicas, on every step's critical path
        bn_sync_s = k * batch_norm_sync_s(ctx, plan.dtype, ctx.n_layers, plan.bn_group,
                                          -(-plan.bn_group // plan.devices_per_node))
        pred.comm_exposed_s["layer_collective"] += bn_sync_s
        pred.details["batch_norm_sync_s"] = bn_sync_s


def lower_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, knob) -> tuple:
    """Serial and data parallelism (strategies.bounds): every replica holds the whole model's parameter state
    (`Context.set_parameters`; none bounded under a ZeRO stage: the candidate's knob, else the base plan's); no time
    bound (a data plan is quick to evaluate)."""
    if (knob[0] if knob else b.plan.zero_stage):  # knob: the candidate's (ZeRO stage, shard group), or None
        return 0.0, 0.0, None
    memory = b.memo.get(("data-parameters", p_data > 1))
    if memory is None:
        memory = b.memo[("data-parameters", p_data > 1)] = b.ctx.parameter_memory(b.ctx.total_params, b.plan, p_data)
    return 0.0, memory, None
