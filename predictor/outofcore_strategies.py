"""Prediction adapters of the out-of-core, recompute and cooperative models, registered as strategies:
serial+recompute and data+recompute (activation checkpointing in `checkpoint_segments` segments, default sqrt(G),
laid out as torch.utils.checkpoint.checkpoint_sequential over the runner's chain) and the same checkpointing on the
model-parallel strategies and their data+ hybrids; serial+offload and data+offload (every saved activation to the
host and back, unoverlapped: save_on_cpu); outofcore (predictor.outofcore's planner under data parallelism); and
cooperative (predictor.cooperative). Each evaluator has the strategies' signature fn(ctx, plan, pred) and raises
Infeasible with the reason. docs/method.md §15-§18.
"""
from __future__ import annotations

import math
from dataclasses import replace


from predictor import outofcore
from predictor.block_costs import (WEIGHT_BYTES_PER_PARAM, boundary_bytes_per_sample, graph_blocks, merged_groups,
                                   per_layer_groups, weight_layer_groups)
from predictor.cooperative import cooperative
from predictor.layercost import OPTIMIZER_STATE_WORDS, Split, update_bytes
from predictor.layout import data_nodes, inner_nodes
from predictor.memory import parameter_bytes
from predictor.plan import ADDON_STRATEGIES, SPLIT_RECOMPUTE, Plan, Prediction, sharding_choices
from predictor.recompute import chain_segments, checkpoint_terms, sqrt_segment_count
from predictor.strategies.bounds import Bounds, refinement
from predictor.strategies.data import evaluate as evaluate_data, local_batch, lower_bound as data_bound, micro_batch
from predictor.strategies.registry import EVALUATORS, register
from predictor.strategies.pipeline import partition as balanced_starts, stage_cut
from predictor.strategies.context import Context, Infeasible
from profiler.errors import UserError



def _device_memory_of_its_own(ctx: Context) -> None:
    """Offload and out-of-core move tensors between the device and the host; on a CPU profile the device's memory
    *is* the host's, so such a plan only adds copies: not offered."""
    if ctx.cm.device_is_host:
        raise Infeasible("a CPU profile: device memory is host memory, there is nothing to offload to")


def _extra(plan: Plan, name: str, default):
    return dict(plan.extra).get(name, default)


def _blocks(ctx: Context, dtype: str, samples: int, per_layer: bool, merge: int = 1):
    """Blocks per layer, or per weighted layer with its followers (`merge` of those per block)."""
    def build():
        if per_layer:
            groups = per_layer_groups(ctx.graph)
        else:
            groups = merged_groups(weight_layer_groups(ctx.graph), merge)
        return graph_blocks(ctx.graph, ctx.coster(dtype), samples, groups)

    return ctx.cached(("outofcore-blocks", dtype, samples, per_layer, merge), build)


# ---- recompute -----------------------------------------------------------------------------------
def _checkpointing(ctx: Context, plan: Plan):
    """(segment count, per-layer blocks at one micro-batch of the local batch, checkpoint terms) of the plan's
    checkpointing: `checkpoint_segments` from Plan.extra, default sqrt of the chain length."""
    chain_len = sum(1 for layer in ctx.layers if layer.op not in ("dropout", "softmax_loss"))
    n_segments = int(_extra(plan, "checkpoint_segments", sqrt_segment_count(chain_len)))
    if not 1 <= n_segments <= chain_len:
        raise Infeasible(f"checkpoint_segments {n_segments} outside 1..{chain_len} layers")
    blocks = _blocks(ctx, plan.dtype, micro_batch(plan), per_layer=True)
    return n_segments, blocks, checkpoint_terms(blocks, chain_segments(ctx.graph, n_segments))


def evaluate_recompute(ctx: Context, plan: Plan, pred: Prediction) -> None:
    """Serial or data parallelism, then checkpointing: + one forward of every checkpointed segment (in every
    gradient-accumulation micro-batch), activations down to the checkpointed peak
    (predictor.recompute.checkpoint_terms)."""
    evaluate_data(ctx, plan, pred)
    n_segments, blocks, terms = _checkpointing(ctx, plan)
    pred.recompute_s = plan.micro_batches * terms.extra_fwd_s
    pred.activations_bytes = max(0.0, pred.activations_bytes - terms.saved_bytes)
    pred.details.update(checkpoint_segments=n_segments, recompute_saved_bytes=terms.saved_bytes)


def evaluate_split_recompute(ctx: Context, plan: Plan, pred: Prediction) -> None:
    """A model-parallel strategy with checkpointing: the base strategy, then the same segments as
    `evaluate_recompute` costed proportionally — recompute = (checkpointed share of the unsplit forward)
    x the strategy's forward compute; activations x (1 - saved share). Exact when the strategy divides every
    layer's work and saved tensors by the same factor; an approximation otherwise (filter and channel keep
    some inputs whole)."""
    base = plan.strategy.removesuffix("+recompute")
    EVALUATORS[base](ctx, replace(plan, strategy=base), pred)
    n_segments, blocks, terms = _checkpointing(ctx, plan)
    total_fwd_s = sum(blk.fwd_s for blk in blocks)
    pred.recompute_s = pred.compute_fwd_s * (terms.extra_fwd_s / total_fwd_s if total_fwd_s else 0.0)
    saved_share = terms.saved_bytes / terms.activation_bytes_without if terms.activation_bytes_without else 0.0
    pred.details.update(checkpoint_segments=n_segments, recompute_saved_bytes=pred.activations_bytes * saved_share)
    pred.activations_bytes *= 1 - saved_share


# ---- offload (torch.autograd.graph.save_on_cpu) --------------------------------------------------
def evaluate_offload(ctx: Context, plan: Plan, pred: Prediction) -> None:
    """Serial or data parallelism with every saved activation offloaded to pinned host memory, as the
    validation runner's `offload` does with torch.autograd.graph.save_on_cpu: its pack/unpack copies run on
    the compute stream, so nothing overlaps: + T_d2h(a_l) + T_h2d(a_l) per layer, and activations on the
    device drop to the largest layer's (being produced, or just brought back for its backward)."""
    _device_memory_of_its_own(ctx)
    evaluate_data(ctx, plan, pred)
    blocks = _blocks(ctx, plan.dtype, micro_batch(plan), per_layer=True)
    pred.swap_s = plan.micro_batches * sum(ctx.cm.host_device_time_s(blk.activation_bytes, "d2h")
                                           + ctx.cm.host_device_time_s(blk.activation_bytes, "h2d") for blk in blocks)
    pred.activations_bytes = max((blk.activation_bytes for blk in blocks), default=0.0)
    pred.details["offloaded_bytes"] = sum(blk.activation_bytes for blk in blocks)


# ---- out-of-core data parallelism ----------------------------------------------------------------
def block_merges(ctx: Context) -> list[int]:
    """Weighted layers per block the planner tries: 1, 2 and sqrt(G) (a recomputed multi-layer block is a
    checkpointed segment, so the coarser lists let the planner checkpoint like sqrt(G) segmenting; the fastest
    plan wins)."""
    return sorted({1, 2, max(1, math.isqrt(len(weight_layer_groups(ctx.graph))))})


def _resident_bytes(ctx: Context, plan: Plan, on: str, samples: int) -> tuple[float, float, float, float, float]:
    """(weights, gradients, optimizer state, of it on the device, workspace): on the device whatever the planner
    does with the blocks."""
    weights, grads, state = parameter_bytes(ctx.total_params, plan.dtype, plan.optimizer, plan.mixed_precision)
    return (weights, grads, state, state if on == "device" else 0.0,
            2 * samples * ctx.largest_output * ctx.act_size(plan.dtype))


def _gradient_stream(ctx: Context, plan: Plan, on: str, p_data: int) -> dict:
    """The gradient pipeline's copies and host update per block's weight bytes (outofcore.data_parallel_iteration):
    to the host, updated there and back (optimizer on the host; the replicas on one node share its memory
    bandwidth), or none (on the device)."""
    if on != "host":
        return dict(d2h_s=_no_time, h2d_s=_no_time, host_update_s=_no_time)
    cm = ctx.cm
    sharing = min(p_data, plan.devices_per_node)

    def update(weight_bytes):
        return cm.memory_time_s(sharing * update_bytes(weight_bytes / WEIGHT_BYTES_PER_PARAM, plan.optimizer,
                                                       plan.dtype), where="host")

    d2h, h2d = _copy_times(ctx)
    return dict(d2h_s=d2h, h2d_s=h2d, host_update_s=update)


def _copy_times(ctx: Context):
    """(device-to-host, host-to-device) copy seconds of a size."""
    cm = ctx.cm
    return (lambda size: cm.host_device_time_s(size, "d2h")), (lambda size: cm.host_device_time_s(size, "h2d"))


def _no_time(size: float) -> float:
    return 0.0


def evaluate_outofcore(ctx: Context, plan: Plan, pred: Prediction) -> None:
    """KARMA-style out-of-core data parallelism (predictor.outofcore). Plan.extra optimizer_on: "host"
    (default; KARMA: optimizer state in host memory, gradients copied out, update at the host memory
    bandwidth, weights streamed back, pipelined per block) or "device" (state and update on the device
    after the backward pass, as in data parallelism; for profiles without a host memory bandwidth). Device memory = weights + gradients (+ optimizer state on the device) +
    workspace + the planner's activations."""
    _device_memory_of_its_own(ctx)
    if plan.inner != 1:
        raise Infeasible("outofcore is data parallel only (p_data = devices)")
    on = _extra(plan, "optimizer_on", "host")
    if on not in ("host", "device"):
        raise Infeasible(f"optimizer_on must be host or device, got {on!r}")
    b = local_batch(plan)
    weights, grads, state, state_on_device, workspace = _resident_bytes(ctx, plan, on, b)
    static = weights + grads + state_on_device + workspace
    d2h, h2d = _copy_times(ctx)
    candidates = []
    for merge in block_merges(ctx):
        blocks = _blocks(ctx, plan.dtype, b, per_layer=False, merge=merge)
        found = outofcore.plan(blocks, pred.device_memory_bytes, d2h, h2d, static_bytes=static)
        if found is not None:
            candidates.append((found.iteration_s, merge, found, blocks))
    # fastest to the nanosecond, then the finest blocks (finer weight streaming for the host optimizer)
    _, merge, single, blocks = min(candidates, key=lambda c: (round(c[0], 9), c[1]), default=(None,) * 4)
    if single is None:
        raise Infeasible(f"does not fit in {pred.device_memory_bytes / 1e9:.3g} GB even swapping every block "
                         f"(weights, gradients, optimizer state and workspace take {static / 1e9:.3g} GB)")
    if on == "device" and set(single.choices) == {outofcore.KEEP}:
        raise Infeasible("every block fits on the device: this is plain data parallelism")
    nodes = data_nodes(plan.p_data, 1, plan.devices_per_node)

    def allreduce(weight_bytes):
        return ctx.collective("allreduce", weight_bytes, plan.p_data, nodes)

    # on the device the update runs after the backward pass, as in data parallelism; on the host it is
    # pipelined per block behind the gradient copies
    stream = _gradient_stream(ctx, plan, on, plan.p_data)
    try:
        with_comm = outofcore.data_parallel_iteration(single, blocks, allreduce_s=allreduce, **stream)
        without_comm = outofcore.data_parallel_iteration(single, blocks, allreduce_s=_no_time, **stream)
    except UserError as missing:
        raise Infeasible(f"optimizer on the host: {missing}") from None
    pred.compute_fwd_s = sum(blk.fwd_s for blk in blocks)
    pred.compute_bwd_s = sum(blk.bwd_s for blk in blocks)
    pred.recompute_s = single.recompute_s
    pred.swap_s = single.exposed_transfer_s
    pred.update_s = without_comm.exposed_update_s if on == "host" else ctx.update_s(ctx.total_params, plan.optimizer,
                                                                                     plan.dtype)
    exposed_comm = with_comm.exposed_update_s - without_comm.exposed_update_s
    pred.comm_exposed_s["gradient"] = exposed_comm
    pred.comm_hidden_s["gradient"] = max(0.0, sum(allreduce(blk.weight_bytes) for blk in blocks) - exposed_comm)
    pred.weights_bytes, pred.grads_bytes, pred.optimizer_bytes = weights, grads, state_on_device
    pred.workspace_bytes = workspace
    pred.activations_bytes = single.peak_bytes - static
    pred.details.update(
        optimizer_on=on, block_choices={blk.name: c for blk, c in zip(blocks, single.choices)},
        layers_per_block=f"{merge} weighted layer(s)",
        swapped_bytes=single.swapped_bytes, nodes_data_group=nodes,
        host_optimizer_bytes=state - state_on_device, params_per_device=ctx.total_params)


# ---- cooperative-process model parallelism -------------------------------------------------------
def evaluate_cooperative(ctx: Context, plan: Plan, pred: Prediction) -> None:
    """Cooperative processes over K = stages devices (predictor.cooperative)."""
    k, m = plan.stages, plan.micro_batches
    if plan.p_data != 1 or plan.inner != k:
        raise Infeasible("cooperative runs stages = devices (no data or other split on top)")
    if k > ctx.n_layers:
        raise Infeasible(f"{k} stages > {ctx.n_layers} layers")
    if plan.batch % m or plan.batch % k:
        raise Infeasible(f"batch {plan.batch} not divisible by {m} micro-batches and {k} processes")
    n = plan.batch // m
    blocks_micro = _blocks(ctx, plan.dtype, n, per_layer=True)
    # the same stage cut as the pipeline (GPipe) strategy: balanced on compute at the micro-batch
    starts = balanced_starts([blk.fwd_s + blk.bwd_s for blk in blocks_micro], k)
    partition = list(zip(starts, starts[1:] + [ctx.n_layers]))
    boundary = boundary_bytes_per_sample(ctx.graph, [start for start, _ in partition], ctx.act_size(plan.dtype))
    nodes = inner_nodes(k, 1, plan.devices_per_node)

    def p2p(size):
        return ctx.collective("sendrecv", size, 2, min(nodes, 2))

    def collective(op, size, group):
        return ctx.collective(op, size, group, nodes)

    cost = cooperative(lambda samples: _blocks(ctx, plan.dtype, samples, per_layer=True), plan.batch, partition,
                       boundary, m, p2p, collective, optimizer_state_per_param=OPTIMIZER_STATE_WORDS[plan.optimizer])
    stage_params = [sum(ctx.params[s:e]) for s, e in partition]
    pred.compute_fwd_s, pred.compute_bwd_s = cost.forward_s, cost.backward_s
    pred.recompute_s, pred.bubble_s = cost.recompute_s, cost.bubble_s
    pred.comm_exposed_s["pipeline_p2p"] = cost.p2p_s
    pred.comm_exposed_s["redistribute"] = cost.collectives_s
    pred.update_s = max(ctx.update_s(p, plan.optimizer, plan.dtype) for p in stage_params)
    weights, _, _ = parameter_bytes(ctx.total_params, plan.dtype, plan.optimizer, plan.mixed_precision)
    _, grads, optimizer_state = parameter_bytes(max(stage_params), plan.dtype, plan.optimizer, plan.mixed_precision)
    pred.weights_bytes, pred.grads_bytes, pred.optimizer_bytes = weights, grads, optimizer_state
    pred.activations_bytes = cost.activation_bytes
    pred.details.update(stage_bounds=partition, stage_params=stage_params, params_per_device=ctx.total_params)


# ---- lower bounds (strategies.bounds); knob: the add-on Plan ---------------------------------------
def whole_model_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, plan: Plan) -> tuple | None:
    """Recomputation or offload on serial or data parallelism: strategies.data's bound (every replica holds the
    whole model's parameter state); offload refused on a CPU profile."""
    if strategy.endswith("+offload") and b.ctx.cm.device_is_host:
        return None
    return data_bound(b, strategy, p, p_data, inner, (plan.zero_stage, plan.shard_group))


def _block_weights(ctx: Context) -> list[list[float]]:
    """Per block grouping of `block_merges`, every block's weight bytes (Block.weight_bytes)."""
    def build():
        single = weight_layer_groups(ctx.graph)
        return [[WEIGHT_BYTES_PER_PARAM * sum(ctx.params[i] for i in range(a, z)) for a, z in merged_groups(single, m)]
                for m in block_merges(ctx)]
    return ctx.graph_cached(("outofcore-block-weights",), build)


def outofcore_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, plan: Plan) -> tuple | None:
    """Out-of-core data parallelism over p (refused as `evaluate_outofcore` refuses it): memory, what stays on the
    device whatever the planner does (`_resident_bytes`); time, the KARMA chain's end, after the compute and after
    every block's all-reduce at the grouping with the cheapest; refined by `refine_outofcore`."""
    ctx = b.ctx
    on = _extra(plan, "optimizer_on", "host")
    if ctx.cm.device_is_host or plan.inner != 1 or on not in ("host", "device"):
        return None
    samples = b.batch // p
    memory = sum(_resident_bytes(ctx, plan, on, samples)[i] for i in (0, 1, 3, 4))
    if not b.timed or b.over_cap(memory):
        return 0.0, memory, None
    split = Split(samples)
    fwd, bwd, _ = ctx.compute(b.dtype, ("all", split), range(ctx.n_layers), lambda i: split)
    nodes = data_nodes(p, 1, b.dpn)
    chain = min(sum(ctx.collective("allreduce", w, p, nodes) for w in weights) for weights in _block_weights(ctx))
    bound = max(fwd + bwd, chain)
    return bound, memory, ("outofcore-chain", plan, bound)


@refinement("outofcore-chain")
def refine_outofcore(b: Bounds, found: tuple) -> tuple[float, float, None]:
    """The same chain with every block kept (no swap or recompute exposure) at each block grouping the planner may
    pick: its choice only delays it (every step of the chain is a max or a sum)."""
    _, plan, bound = found
    ctx, p = b.ctx, plan.p_data
    on = _extra(plan, "optimizer_on", "host")
    nodes = data_nodes(p, 1, b.dpn)

    def allreduce(size):
        return ctx.collective("allreduce", size, p, nodes)

    stream = _gradient_stream(ctx, plan, on, p)
    lowest = math.inf
    try:
        for merge in block_merges(ctx):
            blocks = _blocks(ctx, plan.dtype, b.batch // p, per_layer=False, merge=merge)
            keep = outofcore.OutOfCorePlan((outofcore.KEEP,) * len(blocks), 0.0, 0.0, 0.0, 0.0, 0.0)
            lowest = min(lowest, outofcore.data_parallel_iteration(keep, blocks, allreduce_s=allreduce,
                                                                   **stream).iteration_s)
    except UserError:  # no host coefficient: the evaluation says so
        return 0.0, 0.0, None
    if on == "device":  # the update runs on the device after the backward pass
        lowest += ctx.update_s(ctx.total_params, plan.optimizer, plan.dtype)
    return max(0.0, lowest - bound), 0.0, None


def cooperative_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, plan: Plan) -> tuple | None:
    """Cooperative processes over k devices with m micro-batches (refused as `evaluate_cooperative` refuses it):
    memory >= the whole model's weights + two micro-batches of any one layer's saved tensors; time >= m x the mean
    stage's compute + the weights' all-gather; refined by `refine_cooperative`."""
    ctx = b.ctx
    k, m = plan.stages, plan.micro_batches
    if plan.p_data != 1 or plan.inner != k or k > ctx.n_layers or b.batch % m or b.batch % k:
        return None
    n = b.batch // m
    weights = parameter_bytes(ctx.total_params, plan.dtype, plan.optimizer, plan.mixed_precision)[0]
    memory = weights + 2 * n * _largest_first_saved(ctx, plan.dtype)
    if not b.timed or b.over_cap(memory):
        return 0.0, memory, None
    fsum, bsum, _, _ = b.layer_sums(n)
    time_s = m * (fsum + bsum) / k + _weight_gather_s(b, k)
    return time_s, memory, ("cooperative-cut", plan, weights, time_s, memory)


def _largest_first_saved(ctx: Context, dtype: str) -> float:
    """The most bytes per sample of saved tensors any one layer is the first to save (its block's activations)."""
    def build():
        first = [0.0] * ctx.n_layers
        for t in ctx.saved:
            first[min(t.savers)] += t.size_bytes(dtype)
        return max(first, default=0.0)
    return ctx.graph_cached(("cooperative-largest-first-saved", dtype), build)


def _weight_gather_s(b: Bounds, k: int) -> float:
    """The weights' all-gather over the k processes (predictor.cooperative: every block's weight bytes)."""
    size = WEIGHT_BYTES_PER_PARAM * b.ctx.total_params
    return b.ctx.collective("allgather", size, k, inner_nodes(k, 1, b.dpn))


@refinement("cooperative-cut")
def refine_cooperative(b: Bounds, found: tuple) -> tuple[float, float, None]:
    """With the stage cut itself (the pipeline's `stage_cut`, as `evaluate_cooperative` makes it): memory >= the
    weights + the largest stage-input stash + the prediction step's peak (every stage holds both); time >= m x the
    slowest stage's step + (k - 1) x the slowest backward + the weights' all-gather."""
    _, plan, weights, time_bound, memory_bound = found
    ctx, batch = b.ctx, b.batch
    k, m = plan.stages, plan.micro_batches
    n = batch // m
    per_layer, starts = stage_cut(ctx, plan.dtype, k, n)
    act = ctx.act_size(plan.dtype)
    every = ctx.graph_cached(("boundary-bytes", act), lambda: boundary_bytes_per_sample(
        ctx.graph, range(ctx.n_layers), act))  # a stage's is the same wherever the others start
    boundary = [every[a] for a in starts]
    slices = _blocks(ctx, plan.dtype, max(1, batch // k), per_layer=True)
    peak = max((blk.input_bytes + blk.activation_bytes for blk in slices[: starts[-1]]), default=0.0) + \
        max(boundary) * (batch / k) * k
    memory = weights + max(x * n * m for x in boundary) + peak
    cut = list(zip(starts, starts[1:] + [ctx.n_layers]))
    step = max(sum(per_layer[i][0] + per_layer[i][1] for i in range(a, z)) for a, z in cut)
    backward = max(sum(per_layer[i][1] for i in range(a, z)) for a, z in cut)
    time_s = m * step + (k - 1) * backward + _weight_gather_s(b, k)
    return max(0.0, time_s - time_bound), max(0.0, memory - memory_bound), None


def addon_plans(strategy: str, batch: int, devices: int, devices_per_node: int, dtype: str, optimizer: str,
                micro_batches: int | None = None) -> list[Plan]:
    """The plans `predictor run` evaluates for an add-on strategy (cf. api.default_plans)."""
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer)
    accumulate = micro_batches or 1  # gradient accumulation
    if strategy in ("serial+recompute", "serial+offload"):
        return [Plan(strategy, devices=1, micro_batches=accumulate, **base)]
    if strategy in ("data+recompute", "data+offload"):
        return [Plan(strategy, devices=devices, p_data=devices, micro_batches=accumulate, **base)]
    if strategy == "outofcore":
        return [Plan(strategy, devices=devices, p_data=devices, extra=(("optimizer_on", on),), **base)
                for on in ("host", "device")]
    if strategy == "cooperative":
        counts = [micro_batches] if micro_batches else [s for s in range(1, batch + 1) if batch % s == 0]
        return [Plan(strategy, devices=devices, stages=devices, micro_batches=s, **base) for s in counts]
    raise ValueError(f"not an add-on strategy: {strategy!r}")


#: search families -> the add-on strategies they enumerate
SEARCH_FAMILIES = {"recompute": ("serial+recompute", "data+recompute"), "outofcore": ("outofcore",),
                   "cooperative": ("cooperative",)}


def search_candidates(batch: int, devices: int, devices_per_node: int, dtype: str, optimizer: str,
                      families) -> list[Plan]:
    """Add-on plans for `predictor search` at one device count: recompute (data, also with each of
    `sharding_choices`, or serial) and out-of-core data parallelism when the batch splits
    over the devices, cooperative over 2+ devices with every micro-batch count dividing the batch."""
    plans = []
    if batch % devices == 0:
        if "recompute" in families:
            recompute = addon_plans("serial+recompute" if devices == 1 else "data+recompute", batch, devices,
                                    devices_per_node, dtype, optimizer)
            # sharded replicas beside it (FSDP with activation checkpointing), as the data candidates
            plans += recompute + [replace(plan, zero_stage=zero, shard_group=group)
                                  for zero, group in sharding_choices(devices, devices_per_node) for plan in recompute]
        if "outofcore" in families:
            plans += addon_plans("outofcore", batch, devices, devices_per_node, dtype, optimizer)
        if "cooperative" in families and devices > 1:
            plans += addon_plans("cooperative", batch, devices, devices_per_node, dtype, optimizer)
    return plans


OUT_OF_CORE = ("outofcore", "data+recompute", "serial+recompute", "data+offload", "serial+offload")


def _what(pred: Prediction) -> str:
    """The plan's split plus, for the planner, what it does with the blocks and where the optimizer runs."""
    text = pred.plan.describe()
    choices = pred.details.get("block_choices")
    if choices:
        counts = ", ".join(f"{n} {c}" for c in outofcore.CHOICES if (n := sum(v == c for v in choices.values())))
        text += f"; blocks: {counts}; optimizer on the {pred.details['optimizer_on']}"
    return text


def breakdown(pred: Prediction) -> str | None:
    """One line with what the iteration table leaves out for these strategies (swap, recompute, the
    planner's choices), or None for a prediction without them."""
    if not pred.feasible or not (pred.swap_s or pred.recompute_s or "block_choices" in pred.details):
        return None
    text = (f"{pred.plan.strategy} ({_what(pred)}): compute {pred.compute_fwd_s + pred.compute_bwd_s:.4g} s, "
            f"recompute {pred.recompute_s:.4g} s, exposed swap {pred.swap_s:.4g} s")
    if pred.details.get("host_optimizer_bytes"):
        text += f", optimizer state on the host {pred.details['host_optimizer_bytes'] / 1e9:.3g} GB"
    return text


def swap_vs_model_parallel(best_by_strategy: dict[str, Prediction]) -> str:
    """One line saying whether the fastest fitting out-of-core plan (swap / recompute on data parallelism)
    beats the fastest fitting model-parallel one (any plan with a model split: inner group > 1), from the
    search's best prediction per strategy name."""
    def fastest(keep):
        return min((p for p in best_by_strategy.values() if keep(p.plan)), key=lambda p: p.iteration_s, default=None)

    swap = fastest(lambda plan: plan.strategy in OUT_OF_CORE)
    split = fastest(lambda plan: plan.inner > 1)
    if swap is None and split is None:
        return "neither out-of-core nor model-parallel plans fit"
    if swap is None:
        return f"no out-of-core plan fits; best model-parallel: {split.plan.strategy} ({split.plan.describe()})"
    if split is None:
        return f"no model-parallel plan fits; best out-of-core: {swap.plan.strategy} ({swap.plan.describe()})"
    winner, loser = (swap, split) if swap.iteration_s <= split.iteration_s else (split, swap)
    verb = "beats" if winner is swap else "loses to"
    return (f"out-of-core {swap.plan.strategy} ({_what(swap)}, {swap.iteration_s:.4g} s) {verb} "
            f"model parallelism {split.plan.strategy} ({split.plan.describe()}, {split.iteration_s:.4g} s) "
            f"by {loser.iteration_s / winner.iteration_s - 1:.0%}")


register("serial+recompute", evaluate_recompute, whole_model_bound)
register("data+recompute", evaluate_recompute, whole_model_bound)
for _name in SPLIT_RECOMPUTE:
    register(_name, evaluate_split_recompute)
register("serial+offload", evaluate_offload, whole_model_bound)
register("data+offload", evaluate_offload, whole_model_bound)
register("outofcore", evaluate_outofcore, outofcore_bound)
register("cooperative", evaluate_cooperative, cooperative_bound)
