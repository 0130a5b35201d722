"""Filter (output-channel) parallelism and data x filter (ParaDL tech report Table III; docs/method.md §11, §14).

Each of p_filter devices holds F_l/p_filter filters of every conv/linear layer and the matching slice of every
channel-wise layer. A layer needs its whole input: an all-gather of each distinct input forward, a reduce-scatter of
dL/dx backward (ParaDL charges an all-reduce and notes a reduce-scatter suffices), with the layout copies around
them (layout_copy_s). The model input is replicated, so the first layer needs no gather; no gradient exchange
inside the group; data x filter all-reduces the 1/p_filter gradient slices over the replicas. ParaDL's p²
weight-memory bug is avoided: weights /p. Activations: gathered inputs full size, everything else 1/p_filter.
"""
from __future__ import annotations

from dataclasses import dataclass

from predictor.layercost import Split
from predictor.layout import data_network_share, data_nodes, inner_nodes
from predictor.plan import Plan, Prediction
from predictor.strategies.bounds import Bounds
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch

PARAMETRIC = ("conv2d", "conv3d", "linear")


@dataclass(frozen=True)
class FilterLayout:
    """What filter parallelism splits in a graph (module docstring)."""

    weighted: tuple[int, ...]  # the conv/linear layers
    narrow: int | None  # the one with the fewest filters (p_filter's limit), None without any
    gathered: tuple[int, ...]  # the distinct tensors they read (producers; not the model input), all-gathered
    largest_gather: int  # elements per sample of the largest of those


def filter_layout(ctx: Context) -> FilterLayout:
    def build():
        weighted = tuple(i for i, l in enumerate(ctx.layers) if l.op in PARAMETRIC)
        narrow = min(weighted, key=lambda i: ctx.layers[i].channels_out, default=None)
        gathered = tuple(sorted({ctx.producer(ctx.layers[i].inputs[0] if ctx.layers[i].inputs else "")
                                 for i in weighted} - {-1}))
        return FilterLayout(weighted, narrow, gathered, max((ctx.tensor_elems(t) for t in gathered), default=0))
    return ctx.graph_cached(("filter-layout",), build)


def layer_collectives(ctx: Context, lay: FilterLayout, n: int, p: int, nodes: int, act: int
                      ) -> tuple[float, float, float]:
    """(all-gathers, reduce-scatters, bytes the layout copies move) of one iteration at n samples over p."""
    gather_s = scatter_s = 0.0
    copied = 0.0
    for t in lay.gathered:
        size = n * ctx.tensor_elems(t) * act
        gather_s += ctx.collective("allgather", size, p, nodes)
        scatter_s += ctx.collective("reduce_scatter", size, p, nodes)
        copied += 4 * size + 2 * size / p
    last = n * ctx.layers[-1].output_elems * act
    gather_s += ctx.collective("allgather", last, p, nodes)  # loss input
    copied += 2 * last
    return gather_s, scatter_s, copied


def saved_share(lay: FilterLayout, p: int):
    """share(saved tensor) -> the fraction one device keeps: a gathered input saved by a conv/linear whole, a
    tensor another layer saves 1/p of, the model input whole."""
    gathered_set, conv_savers = set(lay.gathered), set(lay.weighted)

    def share(t) -> float:
        if t.producer < 0:
            return 1.0
        full = 1.0 if t.producer in gathered_set and any(s in conv_savers for s in t.savers) else 0.0
        sliced = 1.0 / p if any(s not in conv_savers for s in t.savers) else 0.0
        return full + sliced

    return share


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    p = plan.p_filter
    n = local_batch(plan)
    lay = filter_layout(ctx)
    narrow = lay.narrow
    if narrow is None:
        raise Infeasible("no conv/linear layer to split by filters")
    if ctx.layers[narrow].channels_out < p:
        raise Infeasible(f"p_filter {p} > {ctx.layers[narrow].channels_out} filters of layer {ctx.layers[narrow].name}")
    act = ctx.act_size(plan.dtype)
    split = Split(n, filter_div=p)
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("filter", split), range(ctx.n_layers), lambda i: split)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd

    nodes = inner_nodes(p, plan.p_data, plan.devices_per_node)
    gather_s, scatter_s, copied = layer_collectives(ctx, lay, n, p, nodes, act)
    copy_s = ctx.cm.memory_time_s(copied)
    pred.comm_exposed_s["layer_collective"] = gather_s + scatter_s + copy_s
    pred.details.update(allgather_s=gather_s, reduce_scatter_s=scatter_s, layout_copy_s=copy_s, nodes_inner_group=nodes)

    local_params = ctx.total_params / p
    pred.update_s = ctx.update_s(local_params, plan.optimizer, plan.dtype)
    d_nodes = data_nodes(plan.p_data, p, plan.devices_per_node)
    exposed, hidden = ctx.gradient_sync(range(ctx.n_layers), bwd_list, p, plan.p_data, d_nodes, plan,
                                        share=data_network_share(plan.p_data, p, plan.devices_per_node))
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    ctx.set_parameters(pred, local_params, plan, plan.p_data)

    share = saved_share(lay, p)
    pred.activations_bytes = n * ctx.saved_bytes_per_sample(plan.dtype, ("filter", p), share)
    pred.comm_buffers_bytes += n * lay.largest_gather * act  # full-size dL/dx before its reduce-scatter
    # activation gradients: full-size dL/dx of a gathered input, 1/p slices elsewhere
    pred.workspace_bytes = n * ctx.workspace_per_sample(
        plan.dtype, ("filter", p), share, lambda i: 1.0 if ctx.layers[i].op in PARAMETRIC else 1.0 / p)


def lower_bound(b: Bounds, strategy: str, devices: int, p_data: int, p: int, knob) -> tuple | None:
    """Filter parallelism over p (strategies.bounds): refused as `evaluate` refuses it; memory: the parameter state
    of 1/p of the model, the saved tensors' shares and the gradient buffer of the largest gathered input; time:
    every layer's overheads, the layer collectives and layout copies, the gradient exchange and the update."""
    ctx, plan = b.ctx, b.plan
    lay = filter_layout(ctx)
    if lay.narrow is None or ctx.layers[lay.narrow].channels_out < p:
        return None
    n = b.batch // p_data
    local = ctx.total_params / p
    per_sample = b.table("filter-per-sample")  # p -> bytes per sample
    found = per_sample.get(p)
    if found is None:
        found = per_sample[p] = ctx.saved_bytes_per_sample(b.dtype, ("filter", p), saved_share(lay, p)) + \
            lay.largest_gather * b.act
    memory = ctx.parameter_memory(local, plan, p_data) + n * found
    if not b.timed or b.over_cap(memory):
        return 0.0, memory, None
    gather_s, scatter_s, copied = layer_collectives(ctx, lay, n, p, inner_nodes(p, p_data, b.dpn), b.act)
    comm = gather_s + scatter_s + ctx.cm.memory_time_s(copied)
    bwd = b.ohb_prefix[-1]
    if p_data > 1:
        floor, copies = b.gradient(("filter", p), p, p_data, data_nodes(p_data, p, b.dpn),
                                   data_network_share(p_data, p, b.dpn))
        bwd = max(bwd, floor)
        comm += copies
    return b.ohf_prefix[-1] + bwd + ctx.update_s(local, plan.optimizer, plan.dtype) + comm, memory, None
