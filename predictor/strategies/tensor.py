"""Tensor parallelism as Megatron-LM runs it, and data x tensor (Shoeybi et al. 2019 §3; Korthikanti et al. 2022
§4.2; docs/method.md §12a).

`tensor_split` finds in any ModelGraph the column-parallel linears (replicated input, F/p output features), the
element-wise layers and attention core acting on their split outputs, and the row-parallel linears reading them
(K/p input features, partial sums all-reduced); what cannot be paired stays replicated. Per region an all-reduce
forward (Megatron's "g") and one backward ("f"): 2 + 2 per transformer layer, as Megatron counts them. Sequence
parallelism (plan.sequence_parallel) splits the tensors between pairs over tokens: each all-reduce becomes a
reduce-scatter + all-gather, token-wise layers run on 1/p of the tokens, and each column layer's input is
all-gathered again in backward, counted exposed (Korthikanti et al.'s Table 4). Compute at each layer's per-device
shape; against ParaDL's filter and channel parallelism, a pair keeps the split between its two layers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from predictor.graph import ModelGraph
from predictor.layercost import Split
from predictor.layout import data_network_share, data_nodes, inner_nodes
from predictor.plan import Plan, Prediction
from predictor.strategies.bounds import Bounds
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch

#: element-wise layers that act on a feature-split tensor locally (every input split the same way)
SPLIT_THROUGH = ("relu", "gelu", "silu", "sigmoid", "tanh", "dropout", "mul", "add", "bias_dropout_add",
                 "pow", "rsqrt", "sqrt", "exp", "scale", "bcast", "random", "compare", "copy")  # copy: a materialised view
#: the attention core: per-head products, softmax and fused attention act on a head-split tensor locally; they
#: keep a split only on (heads, tokens, ...) tensors, where the heads are the split dimension
HEAD_OPS = ("sdpa", "bmm", "softmax")
#: layers that act on each token (sample) on its own: sequence parallelism splits them over tokens
TOKENWISE = ("layernorm", "rmsnorm", "dropout", "add", "bias_dropout_add", "relu", "gelu", "silu", "sigmoid", "tanh",
             "pow", "rsqrt", "sqrt", "exp", "scale", "bcast", "random", "compare", "mean", "sum", "router", "moe_dispatch", "moe_combine")  # a MoE's router, dispatch and combine: per token too
VIEWS = ("flatten",)


@dataclass(frozen=True)
class TensorSplit:
    """The column/row-parallel regions of one graph (`tensor_split`). Indices are graph layer indices;
    tensors are named by their producer (-1 = the model input)."""

    columns: tuple[int, ...]  # column-parallel linears (output features split)
    rows: tuple[int, ...]  # row-parallel linears (input features split, output all-reduced)
    inside: tuple[int, ...]  # element-wise layers between them, on split features
    column_inputs: tuple[int, ...]  # distinct tensors the column layers read (the "f" operators)
    replicated_linears: tuple[int, ...]  # linears left whole (no partner)
    width_gcd: int  # gcd of every split feature count: p_tensor must divide it (0: nothing to split)

    @property
    def split(self) -> frozenset[int]:
        """Layers whose output is split over the tensor group."""
        return frozenset(self.columns + self.inside)


def _producers(graph: ModelGraph) -> list[tuple[int, ...]]:
    """Per layer, the producers of its inputs (-1 = model input; views resolve to what they alias), as
    strategies.context.Context.producer resolves them."""
    index = {l.name: i for i, l in enumerate(graph.layers)}

    def producer(name: str) -> int:
        while name:
            i = index[name]
            if graph.layers[i].op not in VIEWS:
                return i
            name = graph.layers[i].inputs[0] if graph.layers[i].inputs else ""
        return -1

    return [tuple(producer(n) for n in (l.inputs or ("",))) for l in graph.layers]


def tensor_split(graph: ModelGraph) -> TensorSplit:
    """Megatron's column/row pairs of `graph` (module docstring). A fixed point: every linear starts as a
    column candidate; a candidate whose split output reaches a layer that cannot take it (or leaves the graph)
    is barred and the walk repeats, until every split tensor ends in row layers. A column must reach its row
    through at least one element-wise layer (Megatron splits the first GEMM so that its GeLU, or the attention
    core, runs on the split without communication): two linears back to back are not paired."""
    layers = graph.layers
    inputs = _producers(graph)
    read: set[int] = {p for i, srcs in enumerate(inputs) if layers[i].op not in VIEWS for p in srcs}
    barred: set[int] = set()
    while True:
        origin: dict[int, frozenset[int]] = {}  # split tensor -> the columns it comes from
        columns, rows, inside, bad = [], [], [], set()
        for i, layer in enumerate(layers):
            if layer.op in VIEWS:
                continue
            srcs = inputs[i]
            split_in = [s for s in srcs if s in origin]
            if not split_in:
                if layer.op == "linear" and i not in barred:
                    columns.append(i)
                    origin[i] = frozenset((i,))
                continue
            came_from = frozenset().union(*(origin[s] for s in split_in))
            if layer.op == "linear" and len(srcs) == 1 and srcs[0] in columns:
                bad |= came_from  # two linears in a row: no element-wise layer between to run on the split
            elif layer.op == "linear" and len(srcs) == 1:
                rows.append(i)
            elif (layer.op in SPLIT_THROUGH or (layer.op in HEAD_OPS and len(layer.output_shape) >= 3)) \
                    and len(split_in) == len(srcs):
                inside.append(i)
                origin[i] = came_from
            else:
                bad |= came_from
        for t, came_from in origin.items():
            if t not in read:  # a split tensor nobody reads in split form: the graph's output
                bad |= came_from
        if not bad:
            break
        barred |= bad
    column_inputs = tuple(dict.fromkeys(inputs[i][0] for i in columns))
    widths = [split_width(layers[i], i in rows) for i in columns + inside + rows]
    return TensorSplit(tuple(columns), tuple(rows), tuple(inside), column_inputs,
                       tuple(i for i, l in enumerate(layers) if l.op == "linear" and i not in columns and i not in rows),
                       math.gcd(*widths) if columns else 0)


def split_width(layer, row: bool) -> int:
    """The count p_tensor must divide: a row's input features, else the output's features, or its heads on a
    (heads, tokens, ...) attention tensor."""
    if row:
        return layer.input_shape[-1]
    shape = layer.output_shape
    return shape[-3] if len(shape) >= 3 else shape[-1]


def local_parameters(graph: ModelGraph, ts: TensorSplit, p: int) -> list[float]:
    """Parameters each layer keeps on one rank: columns /p, row weights /p with the whole bias, others whole."""
    out = []
    for i, layer in enumerate(graph.layers):
        if i in ts.columns:
            out.append(layer.params / p)
        elif i in ts.rows:
            weight = math.prod(layer.weight_shape) if layer.weight_shape else layer.params
            out.append(weight / p + (layer.params - weight))
        else:
            out.append(float(layer.params))
    return out


@dataclass(frozen=True)
class SequenceSplit:
    """Sequence parallelism's token-split tensors and the collectives at their edges (module docstring)."""

    tokens: frozenset[int]  # layers whose output is split over tokens: the rows and token-wise layers after them
    exits: tuple[int, ...]  # token-split tensors a replicated layer reads: all-gathered in forward
    entries: tuple[int, ...]  # replicated tensors (not the model input) sliced into a token-split layer


def sequence_split(graph: ModelGraph, ts: TensorSplit, seeds: frozenset[int] = frozenset()) -> SequenceSplit:
    """seeds: layers whose output is split over tokens like a row's (data+tensor+pipeline: the embeddings, which
    Megatron scatters over the sequence before the first transformer layer)."""
    inputs = _producers(graph)
    tokens: set[int] = set()
    exits: dict[int, None] = {}
    entries: dict[int, None] = {}
    region = ts.split
    for i, layer in enumerate(graph.layers):
        if layer.op in VIEWS:
            continue
        srcs = inputs[i]
        if i in ts.rows or i in seeds:
            tokens.add(i)
        elif i in region:
            continue
        elif layer.op in TOKENWISE and any(s in tokens for s in srcs):
            tokens.add(i)
            entries.update((s, None) for s in srcs if s not in tokens and s >= 0)
        elif i not in ts.columns:
            exits.update((s, None) for s in srcs if s in tokens)
    return SequenceSplit(frozenset(tokens), tuple(exits), tuple(entries))


def check_degree(ctx: Context, ts: TensorSplit, p: int) -> None:
    if not ts.columns:
        raise Infeasible("no linear -> linear pair (column- then row-parallel) to split by tensor parallelism")
    if ts.width_gcd % p:
        layers = ctx.layers
        for i in ts.columns + ts.inside + ts.rows:
            width = split_width(layers[i], i in ts.rows)
            if width % p:
                what = "heads" if len(layers[i].output_shape) >= 3 and i not in ts.rows else "features"
                raise Infeasible(f"p_tensor {p} does not divide the {width} {what} of layer {layers[i].name}")


def layer_split(ts: TensorSplit, p: int, n: int, tokens: frozenset[int] = frozenset()):
    """split_of(i) -> the Split layer i runs at on one of p tensor ranks with n samples: column and inside layers
    at F/p (filter_div), row layers at K/p (channel_div), token-split layers (sequence parallelism) at 1/p of
    their tokens, everything else whole."""
    region, rows = ts.split, set(ts.rows)
    by_features, by_inputs = Split(n, filter_div=p), Split(n, channel_div=p)
    # token-wise layers under sequence parallelism: 1/p of the tokens. Split has no token divisor; dividing the
    # first per-sample dim (tokens of a (tokens, features) tensor, features of a per-sample vector) by p costs
    # the same elements, and holds for one sample per rank (n < p), where dividing n could not
    whole, token_share = Split(n), Split(n, filter_div=p)

    def split_of(i: int) -> Split:
        if i in region:
            return by_features
        if i in rows:
            return by_inputs
        return token_share if i in tokens else whole

    return split_of


def collectives_by_layer(ctx: Context, ts: TensorSplit, size, p: int, nodes: int
                         ) -> tuple[dict[int, float], dict[int, float]]:
    """Without sequence parallelism: ({row layer: forward all-reduce of its output}, {first column layer reading
    x: backward all-reduce of dL/dx}) in seconds; size(t) = bytes of tensor t on one rank (module docstring)."""
    fwd = {i: ctx.collective("allreduce", size(i), p, nodes) for i in ts.rows}
    inputs = ctx.graph_cached(("tensor-producers",), lambda: _producers(ctx.graph))
    first_reader: dict[int, int] = {}
    for i in ts.columns:
        first_reader.setdefault(inputs[i][0], i)
    bwd = {first_reader[t]: ctx.collective("allreduce", size(t), p, nodes) for t in ts.column_inputs if t >= 0}
    return fwd, bwd


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    p, sp = plan.p_tensor, plan.sequence_parallel
    n = local_batch(plan)
    ts: TensorSplit = ctx.cached(("tensor-split",), lambda: tensor_split(ctx.graph))
    check_degree(ctx, ts, p)
    seq: SequenceSplit | None = ctx.cached(("sequence-split",), lambda: sequence_split(ctx.graph, ts)) if sp else None
    act = ctx.act_size(plan.dtype)
    region = ts.split
    tokens = seq.tokens if seq is not None and p > 1 else frozenset()
    split_of = layer_split(ts, p, n, tokens)
    fwd, bwd, bwd_list = ctx.compute(plan.dtype, ("tensor", n, p, sp), range(ctx.n_layers), split_of)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd

    nodes = inner_nodes(p, plan.p_data, plan.devices_per_node)
    coll = ctx.collective
    size = lambda t: n * ctx.tensor_elems(t) * act  # noqa: E731 - bytes of tensor t on one rank
    if seq is None:
        by_row, by_column = collectives_by_layer(ctx, ts, size, p, nodes)
        fwd_s, bwd_s = sum(by_row.values()), sum(by_column.values())
    else:
        fwd_s = sum(coll("reduce_scatter", size(i), p, nodes) for i in ts.rows) + sum(
            coll("allgather", size(t), p, nodes) for t in ts.column_inputs if t in tokens) + sum(
            coll("allgather", size(t), p, nodes) for t in seq.exits)
        inputs = ctx.graph_cached(("tensor-producers",), lambda: _producers(ctx.graph))
        bwd_s = sum(coll("allgather", size(i), p, nodes) for i in ts.rows) + sum(
            coll("reduce_scatter", size(t), p, nodes) if t in tokens else coll("allreduce", size(t), p, nodes)
            for t in ts.column_inputs if t >= 0) + sum(coll("allgather", size(t), p, nodes) for t in seq.entries) + sum(
            coll("allgather", size(inputs[i][0]), p, nodes) for i in ts.columns if inputs[i][0] in tokens)
    pred.comm_exposed_s["layer_collective"] = fwd_s + bwd_s
    names = lambda idx: [ctx.layers[i].name for i in idx]  # noqa: E731
    pred.details.update(tensor_fwd_collective_s=fwd_s, tensor_bwd_collective_s=bwd_s, nodes_inner_group=nodes,
                        column_parallel=names(ts.columns), row_parallel=names(ts.rows),
                        replicated_linears=names(ts.replicated_linears),
                        tensor_notes=(f"{len(ts.rows)} row-parallel linear(s) after {len(ts.columns)} column-parallel; "
                                      + (f"replicated: {', '.join(names(ts.replicated_linears))} and every "
                                         "non-linear layer outside the pairs" if ts.replicated_linears else
                                         "every layer outside the pairs replicated")))

    local = _local_parameters(ctx, ts, p)
    local_params = sum(local)
    pred.update_s = ctx.update_s(local_params, plan.optimizer, plan.dtype, mixed_precision=plan.mixed_precision)
    divisors = ctx.cached(("tensor-divisors", p), lambda: tuple(
        ctx.params[i] / x if x else 1 for i, x in enumerate(local)))
    d_nodes = data_nodes(plan.p_data, p, plan.devices_per_node)
    exposed, hidden = ctx.gradient_sync(range(ctx.n_layers), bwd_list, divisors, plan.p_data, d_nodes, plan,
                                        share=data_network_share(plan.p_data, p, plan.devices_per_node))
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    ctx.set_parameters(pred, local_params, plan, plan.p_data)

    sliced = region | tokens
    share = _saved_share(sliced, p)
    key = ("tensor", p, sp)
    pred.activations_bytes = n * ctx.saved_bytes_per_sample(plan.dtype, key, share)
    pred.workspace_bytes = n * ctx.workspace_per_sample(plan.dtype, key, share,
                                                        lambda i: 1.0 / p if i in sliced else 1.0)
    if seq is not None and p > 1:  # the gathered (full) tensor before a column or a replicated reader
        gathered = [t for t in ts.column_inputs if t in tokens] + list(seq.exits)
        pred.comm_buffers_bytes += max((size(t) for t in gathered), default=0.0)


def _local_parameters(ctx: Context, ts: TensorSplit, p: int) -> list[float]:
    return ctx.cached(("tensor-params", p), lambda: local_parameters(ctx.graph, ts, p))


def _saved_share(sliced: frozenset[int], p: int):
    """share(saved tensor) -> the fraction one rank keeps: 1/p of a split (or token-split) layer's output."""
    return lambda t: 1.0 / p if t.producer in sliced else 1.0


def lower_bound(b: Bounds, strategy: str, devices: int, p_data: int, p: int, knob) -> tuple | None:
    """Tensor parallelism over p (strategies.bounds): refused as `evaluate` refuses the degree; memory: each rank's
    parameter state and, without sequence parallelism, its saved tensors' shares; no time bound (few plans)."""
    ctx, plan = b.ctx, b.plan
    ts: TensorSplit = ctx.cached(("tensor-split",), lambda: tensor_split(ctx.graph))
    try:
        check_degree(ctx, ts, p)
    except Infeasible:
        return None
    memory = ctx.parameter_memory(sum(_local_parameters(ctx, ts, p)), plan, p_data)
    if not plan.sequence_parallel:
        memory += b.batch // p_data * ctx.saved_bytes_per_sample(b.dtype, ("tensor", p, False),
                                                                 _saved_share(ts.split, p))
    return 0.0, memory, None
