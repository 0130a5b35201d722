"""Channel (input-channel) parallelism and data x channel (ParaDL tech report Table III; docs/method.md §12).

Each of p_channel devices holds the C_l/p_channel input-channel slice of every conv/linear weight and the matching
activation slice, so a layer produces a partial sum of the whole output: an all-reduce of y forward (ChainerMNX's
choice) and an all-gather of the dL/dy slices backward, with the layout copies around them (layout_copy_s). These
are other collectives than filter parallelism's, so unlike ParaDL (identical formulas, defect 10) filter and channel
predictions differ. The layers reading the model input run unsplit, as in ParaDL's experiments, their partial
weight gradients all-reduced over the group after backward (head_gradient_s). Compute is costed at C/p.
"""
from __future__ import annotations

from predictor.layercost import Split
from predictor.layout import data_network_share, data_nodes, inner_nodes
from predictor.memory import gradient_bytes_per_param
from predictor.plan import Plan, Prediction
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch
from predictor.strategies.filter import PARAMETRIC


def head_gradient_s(ctx: Context, heads, plan: Plan, p: int, nodes: int) -> float:
    """The unsplit head layers' gradient allreduce over the p_channel group, after backward: every device runs
    them on the whole input but keeps only its own output channels, so each holds a partial weight gradient
    (zero for the other devices' filters) and the sum over the group is the gradient (predictor.runner.channel:
    one flattened allreduce, blocking)."""
    size = sum(ctx.params[i] for i in heads) * gradient_bytes_per_param(plan.dtype, plan.mixed_precision)
    return ctx.collective("allreduce", size, p, nodes) if size > 0 else 0.0


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    p = plan.p_channel
    n = local_batch(plan)
    weighted = [i for i, l in enumerate(ctx.layers) if l.op in PARAMETRIC]
    heads = {i for i in weighted if ctx.producer(ctx.layers[i].inputs[0] if ctx.layers[i].inputs else "") < 0}
    split_layers = [i for i in weighted if i not in heads]
    if not split_layers:
        raise Infeasible("no conv/linear layer past the input to split by channels")
    narrow = min(split_layers, key=lambda i: ctx.layers[i].channels_in)
    if ctx.layers[narrow].channels_in < p:
        raise Infeasible(f"p_channel {p} > {ctx.layers[narrow].channels_in} input channels of layer "
                         f"{ctx.layers[narrow].name}")
    act = ctx.act_size(plan.dtype)
    whole = Split(n)
    sliced = Split(n, channel_div=p)
    # layers before the first split conv/linear see replicated activations; from then on, channel slices
    first_split = min(split_layers)
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("channel", sliced, tuple(sorted(heads))), range(ctx.n_layers),
                                     lambda i: whole if i in heads or i < first_split else sliced)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd

    nodes = inner_nodes(p, plan.p_data, plan.devices_per_node)
    reduce_s = gather_s = 0.0
    copied = 0.0  # bytes the layout copies move (module docstring)
    last = max(split_layers)
    for i in split_layers:
        size = n * ctx.layers[i].output_elems * act
        reduce_s += ctx.collective("allreduce", size, p, nodes)
        gather_s += ctx.collective("allgather", size, p, nodes)
        copied += 2 * size if i == last else 4 * size + 2 * size / p
    copy_s = ctx.cm.memory_time_s(copied)
    pred.comm_exposed_s["layer_collective"] = reduce_s + gather_s + copy_s
    pred.details.update(allreduce_s=reduce_s, allgather_s=gather_s, layout_copy_s=copy_s, nodes_inner_group=nodes)

    head_params = sum(ctx.params[i] for i in range(first_split))
    local_params = head_params + (ctx.total_params - head_params) / p
    pred.update_s = ctx.update_s(local_params, plan.optimizer, plan.dtype)
    d_nodes = data_nodes(plan.p_data, p, plan.devices_per_node)
    divisors = tuple(1 if i < first_split else p for i in range(ctx.n_layers))
    exposed, hidden = ctx.gradient_sync(range(ctx.n_layers), bwd_list, divisors, plan.p_data, d_nodes, plan,
                                        share=data_network_share(plan.p_data, p, plan.devices_per_node))
    head_s = head_gradient_s(ctx, heads, plan, p, nodes)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed + head_s, hidden
    pred.details.update(head_gradient_allreduce_s=head_s)
    ctx.set_parameters(pred, local_params, plan, plan.p_data)

    def share(t) -> float:
        return 1.0 if t.producer < first_split else 1.0 / p

    pred.activations_bytes = n * ctx.saved_bytes_per_sample(plan.dtype, ("channel", p), share)
    largest = max(ctx.layers[i].output_elems for i in split_layers)
    pred.comm_buffers_bytes += n * largest * act  # full-size partial output being allreduced
    pred.workspace_bytes = n * ctx.workspace_per_sample(plan.dtype, ("channel", p), share,
                                                        lambda i: 1.0 if i < first_split else 1.0 / p)

