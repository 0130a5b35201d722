"""Data x tensor x pipeline parallelism as Megatron-LM lays it out (`data+tensor+pipeline`; Narayanan et al.,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21, §2-3; docs/method.md §14a).

**Layout.** devices = p_data · t · K with t = p_tensor and K = stages. Ranks are numbered tensor-fastest, then
data, then pipeline (Megatron's `initialize_model_parallel`): a tensor group is t consecutive ranks (inside a node
when t divides the node), a data group takes every t-th rank of a block of p_data·t, a pipeline group every
(p_data·t)-th rank.

**Per layer, one micro-batch** (m = B / (p_data · S) samples, S = plan.micro_batches): the layer's time at its
tensor-parallel shape (strategies.tensor.layer_split: column and inside layers F/t, row layers K/t) plus its
tensor-parallel all-reduces over the t ranks (strategies.tensor.collectives_by_layer: forward all-reduce of a row
layer's output, backward all-reduce of a column layer's dL/dx; 2 + 2 per transformer layer). Sequence
parallelism is not modelled here.

**Pipeline.** The layers are cut into K·v chunks balanced on that time (strategies.pipeline.partition over the
blocks between `cut_points`: a stage starts only where the fewest elements cross, between transformer layers, never
inside attention), chunk j on pipeline rank j mod K (v = plan.virtual_stages with the interleaved schedule, else 1). With F, Bw the slowest
pipeline rank's forward and backward time per micro-batch (compute + tensor all-reduces) and R the forward of
its transformer layers when activations are recomputed (plan.recompute: Megatron's full checkpointing re-runs each
transformer layer's forward, its all-reduces included, before its backward; `recomputed_layers`), else 0:

    compute + layer collectives + recompute = S · (F + Bw + R)
    bubble   = (K - 1) · (F + Bw + R) / v                        (bubble share (K - 1) / (S · v), §2.2)
    p2p      = 2 · (v·S + K - 2) · T_sendrecv(m · |boundary| · δ)  (strategies.pipeline; the whole boundary
               tensor on every tensor rank: Megatron's scatter/gather of it over the tensor group not modelled)

**Data parallelism.** Each pipeline rank's gradients (its chunks' layers, tensor-split: strategies.tensor.
local_parameters) are all-reduced over the p_data replicas behind the last micro-batch's backward
(Context.gradient_sync, the plan's framework regime); the optimizer updates the pipeline rank's local parameters.

**Memory** (the heaviest pipeline rank): local parameters, gradients and optimizer state; saved tensors of
in-flight micro-batches (strategies.pipeline.in_flight: min(S, K - k) for 1F1B), each tensor of a split layer
at 1/t; with recompute, the chunk inputs of the in-flight micro-batches plus one micro-batch's saved tensors.
"""
from __future__ import annotations

from predictor.layout import nodes_spanned
from predictor.memory import parameter_bytes
from predictor.plan import PIPELINE_SCHEDULES, Plan, Prediction
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch
from predictor.strategies.pipeline import in_flight, partition
from predictor.strategies.tensor import (TensorSplit, check_degree, collectives_by_layer, layer_split,
                                         local_parameters, tensor_split)


def layout_nodes(plan: Plan) -> tuple[int, int, int]:
    """(nodes a tensor group spans, nodes a data group spans, nodes two neighbouring pipeline ranks span) in
    Megatron's rank order (module docstring)."""
    t, d, K, dpn = plan.p_tensor, plan.p_data, plan.stages, plan.devices_per_node
    tensor_nodes = nodes_spanned(t, 1, dpn, min(d * K, dpn))
    data_nodes = nodes_spanned(d, t, dpn, min(t, dpn)) if d > 1 else 1
    pipe_nodes = nodes_spanned(2, t * d, dpn, 1) if K > 1 else 1
    return tensor_nodes, data_nodes, pipe_nodes


def pipeline_terms(F: float, Bw: float, R: float, S: int, K: int, v: int) -> tuple[float, float]:
    """(busy seconds, bubble seconds) of one 1F1B iteration: S·(F + Bw + R) and (K - 1)·(F + Bw + R)/v."""
    step = F + Bw + R
    return S * step, (K - 1) * step / v


def p2p_count(S: int, K: int, v: int) -> int:
    """Boundary sends on the critical path: 2·(v·S + K - 2) (forward activation, backward gradient), 0 for K = 1."""
    return 2 * (v * S + K - 2) if K > 1 else 0


def cut_points(ctx: Context) -> list[int]:
    """Layer indices a stage may start at: 0 and every interior boundary where the fewest elements per sample cross
    (one tensor of the residual stream between transformer layers, as Megatron cuts), so no stage boundary falls
    inside a layer (where the attention scores would cross)."""
    widths = {a: sum(ctx.tensor_elems(x) for x in ctx.crossing(a)) for a in range(1, ctx.n_layers)}
    narrowest = min(widths.values(), default=0)
    return [0] + [a for a, w in widths.items() if w == narrowest]


def recomputed_layers(ctx: Context, ts: TensorSplit) -> range:
    """The layers full recomputation re-runs: Megatron checkpoints the transformer layers, here the span of the
    column/row pairs widened to the nearest cut points (`cut_points`), so the embeddings, the final norm, the
    language-model head and the loss are not recomputed. The whole graph when it has no pair."""
    if not ts.columns:
        return range(ctx.n_layers)
    cuts = cut_points(ctx) + [ctx.n_layers]
    first, last = min(ts.columns), max(ts.rows or ts.columns)
    return range(max(c for c in cuts if c <= first), min(c for c in cuts if c > last))


def block_partition(ctx: Context, costs: list[float], stages: int) -> list[int]:
    """Stage starts: strategies.pipeline.partition over the blocks between cut points (`cut_points`)."""
    cuts = cut_points(ctx)
    bounds = list(zip(cuts, cuts[1:] + [len(costs)]))
    if len(bounds) < stages:
        return cuts
    return [cuts[j] for j in partition([sum(costs[a:z]) for a, z in bounds], stages)]


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    t, K, S = plan.p_tensor, plan.stages, plan.micro_batches
    v = plan.virtual_stages if plan.schedule == "interleaved" else 1
    if plan.schedule not in PIPELINE_SCHEDULES or plan.schedule == "gpipe":
        raise Infeasible(f"data+tensor+pipeline runs Megatron's 1f1b or interleaved schedule, not {plan.schedule!r}")
    if plan.schedule == "interleaved" and (v < 2 or S % K):
        raise Infeasible(f"interleaved 1F1B needs >= 2 virtual stages and micro-batches ({S}) a multiple of the "
                         f"{K} stages")
    if plan.sequence_parallel:
        raise Infeasible("sequence parallelism is not modelled with data+tensor+pipeline")
    b = local_batch(plan)
    if K * v > ctx.n_layers:
        raise Infeasible(f"{K * v} stages > {ctx.n_layers} layers")
    if b % S:
        raise Infeasible(f"{b} samples per pipeline not divisible into {S} micro-batches")
    m = b // S
    ts: TensorSplit = ctx.cached(("tensor-split",), lambda: tensor_split(ctx.graph))
    if t > 1:
        check_degree(ctx, ts, t)
    dtype, act = plan.dtype, ctx.act_size(plan.dtype)
    tensor_nodes, d_nodes, pipe_nodes = layout_nodes(plan)

    def per_layer():
        coster, split_of = ctx.coster(dtype), layer_split(ts, t, m)
        times = [coster.times(i, split_of(i)) for i in range(ctx.n_layers)]
        size = lambda x: m * ctx.tensor_elems(x) * act  # noqa: E731 - bytes of tensor x on one rank
        fwd_c, bwd_c = collectives_by_layer(ctx, ts, size, t, tensor_nodes) if t > 1 else ({}, {})
        return times, [fwd_c.get(i, 0.0) for i in range(ctx.n_layers)], [bwd_c.get(i, 0.0) for i in range(ctx.n_layers)]

    times, fwd_comm, bwd_comm = ctx.cached(("3d-layers", dtype, t, m, tensor_nodes), per_layer)
    costs = [f + b_ + cf + cb for (f, b_), cf, cb in zip(times, fwd_comm, bwd_comm)]
    starts = ctx.cached(("3d-cut", dtype, t, m, tensor_nodes, K * v), lambda: block_partition(ctx, costs, K * v))
    if len(starts) < K * v:
        raise Infeasible(f"{K * v} stages > {len(starts)} blocks between the graph's narrowest cut points")
    bounds = list(zip(starts, starts[1:] + [ctx.n_layers]))
    ranks = [[i for j in range(k, K * v, K) for i in range(*bounds[j])] for k in range(K)]

    def rank_sum(values, k):
        return sum(values[i] for i in ranks[k])

    fwd_c = [rank_sum([f for f, _ in times], k) for k in range(K)]
    bwd_c = [rank_sum([b_ for _, b_ in times], k) for k in range(K)]
    fwd_x = [rank_sum(fwd_comm, k) for k in range(K)]
    bwd_x = [rank_sum(bwd_comm, k) for k in range(K)]
    again = ctx.cached(("3d-recomputed",), lambda: recomputed_layers(ctx, ts)) if plan.recompute else range(0)
    redo = [sum(times[i][0] + fwd_comm[i] for i in ranks[k] if i in again) for k in range(K)]
    slow = max(range(K), key=lambda k: fwd_c[k] + bwd_c[k] + fwd_x[k] + bwd_x[k] + redo[k])
    F, Bw, R = fwd_c[slow] + fwd_x[slow], bwd_c[slow] + bwd_x[slow], redo[slow]
    _, bubble = pipeline_terms(F, Bw, R, S, K, v)
    pred.compute_fwd_s, pred.compute_bwd_s = S * fwd_c[slow], S * bwd_c[slow]
    pred.comm_exposed_s["layer_collective"] = S * (fwd_x[slow] + bwd_x[slow])
    pred.recompute_s = S * R
    pred.bubble_s = bubble

    boundary = max((sum(ctx.tensor_elems(x) for x in ctx.crossing(a)) for a, _ in bounds[1:]), default=0)
    pred.comm_exposed_s["pipeline_p2p"] = p2p_count(S, K, v) * ctx.collective("sendrecv", m * boundary * act, 2,
                                                                                 pipe_nodes)

    local = ctx.cached(("tensor-params", t), lambda: local_parameters(ctx.graph, ts, t))
    dev_params = [rank_sum(local, k) for k in range(K)]
    dev_tensors = [rank_sum(ctx.param_tensors, k) for k in range(K)]
    pred.update_s = max(ctx.update_s(p, plan.optimizer, dtype, n) for p, n in zip(dev_params, dev_tensors))
    divisors = tuple(ctx.params[i] / x if x else 1 for i, x in enumerate(local))
    exposed = hidden = 0.0
    for k in range(K):
        layers = tuple(ranks[k])
        e, h = ctx.gradient_sync(layers, [times[i][1] + bwd_comm[i] for i in layers],
                                 tuple(divisors[i] for i in layers), plan.p_data, d_nodes, plan.bucket_bytes,
                                 plan.framework)
        if e >= exposed:
            exposed, hidden = e, h
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden

    region = ts.split if t > 1 else frozenset()

    def memory(k: int) -> tuple[float, float, float]:
        held = set(ranks[k])
        saved = ctx.saved_bytes_per_sample(dtype, ("3d", t, K, v, k, tuple(starts)), lambda x: (
            (1.0 / t if x.producer in region else 1.0) if any(s in held for s in x.savers) else 0.0))
        flight = in_flight(plan, k)
        chunks = len(range(k, K * v, K))
        if plan.recompute:
            incoming = sum(sum(ctx.tensor_elems(x) for x in ctx.crossing(bounds[j][0])) if bounds[j][0] > 0
                           else ctx.tensor_elems(-1) for j in range(k, K * v, K)) / chunks
            activations = flight * m * incoming * act + m * saved / chunks
        else:
            activations = flight * m * saved / chunks
        return activations + sum(parameter_bytes(dev_params[k], dtype, plan.optimizer)), activations, k

    _, pred.activations_bytes, heavy = max(memory(k) for k in range(K))
    ctx.set_parameters(pred, dev_params[heavy], plan, plan.p_data)
    pred.details.update(stage_bounds=bounds, slowest_stage=slow, memory_stage=heavy, nodes_tensor_group=tensor_nodes,
                        nodes_data_group=d_nodes, nodes_pipeline_pair=pipe_nodes, micro_batch=m,
                        tensor_fwd_collective_s=S * fwd_x[slow], tensor_bwd_collective_s=S * bwd_x[slow])

