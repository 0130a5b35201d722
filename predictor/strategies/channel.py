"""Channel (input-channel) parallelism and data x channel (ParaDL tech report Table III; docs/method.md §12).

Each of p_channel devices holds the C_l/p_channel input-channel slice of every conv/linear weight and the matching
activation slice, so a layer produces a partial sum of the whole output: an all-reduce of y forward (ChainerMNX's
choice) and an all-gather of the dL/dy slices backward, with the layout copies around them (layout_copy_s). These
are other collectives than filter parallelism's, so unlike ParaDL (identical formulas, defect 10) filter and channel
predictions differ. The layers reading the model input run unsplit, as in ParaDL's experiments, their partial
weight gradients all-reduced over the group after backward (head_gradient_s). Compute is costed at C/p.
"""
from __future__ import annotations

from dataclasses import dataclass

from predictor.layercost import Split
from predictor.layout import data_network_share, data_nodes, inner_nodes
from predictor.memory import gradient_bytes_per_param
from predictor.plan import Plan, Prediction
from predictor.strategies.bounds import Bounds
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch
from predictor.strategies.filter import PARAMETRIC


@dataclass(frozen=True)
class ChannelLayout:
    """What channel parallelism splits in a graph (module docstring)."""

    heads: frozenset[int]  # conv/linear layers reading the model input: run unsplit
    split_layers: tuple[int, ...]  # the other conv/linear layers: split by input channels
    narrow: int | None  # the split layer with the fewest input channels (p_channel's limit), None without any
    first_split: int  # layers before it see replicated activations
    head_params: int  # parameters of the layers before it (kept whole)
    largest: int  # elements per sample of the largest split layer's output (its partial sum is all-reduced)


def channel_layout(ctx: Context) -> ChannelLayout:
    def build():
        weighted = [i for i, l in enumerate(ctx.layers) if l.op in PARAMETRIC]
        heads = {i for i in weighted if ctx.producer(ctx.layers[i].inputs[0] if ctx.layers[i].inputs else "") < 0}
        split_layers = tuple(i for i in weighted if i not in heads)
        if not split_layers:
            return ChannelLayout(frozenset(heads), (), None, ctx.n_layers, ctx.total_params, 0)
        first_split = min(split_layers)
        return ChannelLayout(frozenset(heads), split_layers, min(split_layers, key=lambda i: ctx.layers[i].channels_in),
                             first_split, sum(ctx.params[i] for i in range(first_split)),
                             max(ctx.layers[i].output_elems for i in split_layers))
    return ctx.graph_cached(("channel-layout",), build)


def head_gradient_s(ctx: Context, heads, plan: Plan, p: int, nodes: int) -> float:
    """The unsplit head layers' gradient allreduce over the p_channel group, after backward: every device runs
    them on the whole input but keeps only its own output channels, so each holds a partial weight gradient
    (zero for the other devices' filters) and the sum over the group is the gradient (predictor.runner.channel:
    one flattened allreduce, blocking)."""
    size = sum(ctx.params[i] for i in heads) * gradient_bytes_per_param(plan.dtype, plan.mixed_precision)
    return ctx.collective("allreduce", size, p, nodes) if size > 0 else 0.0


def layer_collectives(ctx: Context, lay: ChannelLayout, n: int, p: int, nodes: int, act: int
                      ) -> tuple[float, float, float]:
    """(all-reduces, all-gathers, bytes the layout copies move) of one iteration at n samples over p."""
    reduce_s = gather_s = 0.0
    copied = 0.0
    last = max(lay.split_layers)
    for i in lay.split_layers:
        size = n * ctx.layers[i].output_elems * act
        reduce_s += ctx.collective("allreduce", size, p, nodes)
        gather_s += ctx.collective("allgather", size, p, nodes)
        copied += 2 * size if i == last else 4 * size + 2 * size / p
    return reduce_s, gather_s, copied


def gradient_divisors(ctx: Context, lay: ChannelLayout, p: int) -> tuple:
    return ctx.cached(("channel-divisors", p), lambda: tuple(1 if i < lay.first_split else p
                                                             for i in range(ctx.n_layers)))


def saved_share(lay: ChannelLayout, p: int):
    """share(saved tensor) -> the fraction one device keeps: whole before the first split layer, 1/p after."""
    first_split = lay.first_split
    return lambda t: 1.0 if t.producer < first_split else 1.0 / p


def _saved_parts(ctx: Context, lay: ChannelLayout, dtype: str) -> tuple[float, float]:
    """`saved_share`'s sum regrouped: (bytes per sample of the saved tensors kept whole, of those kept 1/p)."""
    def build():
        return (sum(t.size_bytes(dtype) for t in ctx.saved if t.producer < lay.first_split),
                sum(t.size_bytes(dtype) for t in ctx.saved if t.producer >= lay.first_split))
    return ctx.graph_cached(("channel-saved-parts", dtype), build)


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    p = plan.p_channel
    n = local_batch(plan)
    lay = channel_layout(ctx)
    heads, split_layers = lay.heads, lay.split_layers
    if not split_layers:
        raise Infeasible("no conv/linear layer past the input to split by channels")
    narrow = lay.narrow
    if ctx.layers[narrow].channels_in < p:
        raise Infeasible(f"p_channel {p} > {ctx.layers[narrow].channels_in} input channels of layer "
                         f"{ctx.layers[narrow].name}")
    act = ctx.act_size(plan.dtype)
    whole = Split(n)
    sliced = Split(n, channel_div=p)
    # layers before the first split conv/linear see replicated activations; from then on, channel slices
    first_split = lay.first_split
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("channel", sliced, tuple(sorted(heads))), range(ctx.n_layers),
                                     lambda i: whole if i in heads or i < first_split else sliced)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd

    nodes = inner_nodes(p, plan.p_data, plan.devices_per_node)
    reduce_s, gather_s, copied = layer_collectives(ctx, lay, n, p, nodes, act)
    copy_s = ctx.cm.memory_time_s(copied)
    pred.comm_exposed_s["layer_collective"] = reduce_s + gather_s + copy_s
    pred.details.update(allreduce_s=reduce_s, allgather_s=gather_s, layout_copy_s=copy_s, nodes_inner_group=nodes)

    local_params = lay.head_params + (ctx.total_params - lay.head_params) / p
    pred.update_s = ctx.update_s(local_params, plan.optimizer, plan.dtype)
    d_nodes = data_nodes(plan.p_data, p, plan.devices_per_node)
    exposed, hidden = ctx.gradient_sync(range(ctx.n_layers), bwd_list, gradient_divisors(ctx, lay, p), plan.p_data,
                                        d_nodes, plan, share=data_network_share(plan.p_data, p, plan.devices_per_node))
    head_s = head_gradient_s(ctx, heads, plan, p, nodes)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed + head_s, hidden
    pred.details.update(head_gradient_allreduce_s=head_s)
    ctx.set_parameters(pred, local_params, plan, plan.p_data)

    share = saved_share(lay, p)
    pred.activations_bytes = n * ctx.saved_bytes_per_sample(plan.dtype, ("channel", p), share)
    pred.comm_buffers_bytes += n * lay.largest * act  # full-size partial output being allreduced
    pred.workspace_bytes = n * ctx.workspace_per_sample(plan.dtype, ("channel", p), share,
                                                        lambda i: 1.0 if i < first_split else 1.0 / p)


def _unsplit_times(b: Bounds, lay: ChannelLayout, n: int) -> tuple[float, float]:
    """The unsplit layers' compute at n samples + every other layer's overheads."""
    def build():
        fwd, bwd = b.ohf_prefix[-1], b.ohb_prefix[-1]
        split = Split(n)
        for i in range(b.ctx.n_layers):
            if i in lay.heads or i < lay.first_split:
                f, bw = b.coster.times(i, split)
                fwd += f - b.ohf[i]
                bwd += bw - b.ohb[i]
        return fwd, bwd
    return b.cached(("channel-unsplit", n), build)


def lower_bound(b: Bounds, strategy: str, devices: int, p_data: int, p: int, knob) -> tuple | None:
    """Channel parallelism over p (strategies.bounds): refused as `evaluate` refuses it; memory: the parameter state
    (heads whole, the rest 1/p), the saved tensors' shares and the largest partial output's buffer; time: the
    unsplit layers' compute and the others' overheads, the layer collectives and layout copies, the gradient
    exchange, the heads' gradient all-reduce and the update."""
    ctx, plan = b.ctx, b.plan
    lay = channel_layout(ctx)
    if lay.narrow is None or ctx.layers[lay.narrow].channels_in < p:
        return None
    n = b.batch // p_data
    local = lay.head_params + (ctx.total_params - lay.head_params) / p
    whole, sliced = _saved_parts(ctx, lay, b.dtype)
    memory = ctx.parameter_memory(local, plan, p_data) + n * (whole + sliced / p + lay.largest * b.act)
    if not b.timed or b.over_cap(memory):
        return 0.0, memory, None
    nodes = inner_nodes(p, p_data, b.dpn)
    reduce_s, gather_s, copied = layer_collectives(ctx, lay, n, p, nodes, b.act)
    comm = reduce_s + gather_s + ctx.cm.memory_time_s(copied) + head_gradient_s(ctx, lay.heads, plan, p, nodes)
    fwd, bwd = _unsplit_times(b, lay, n)
    if p_data > 1:
        floor, copies = b.gradient(("channel", p), gradient_divisors(ctx, lay, p), p_data,
                                   data_nodes(p_data, p, b.dpn), data_network_share(p_data, p, b.dpn))
        bwd = max(bwd, floor)
        comm += copies
    return fwd + bwd + ctx.update_s(local, plan.optimizer, plan.dtype) + comm, memory, None
