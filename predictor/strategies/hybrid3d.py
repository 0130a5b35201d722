"""Data x tensor x pipeline parallelism as Megatron-LM lays it out (`data+tensor+pipeline`; Narayanan et al., SC'21
§2-3; docs/method.md §14a).

Ranks tensor-fastest, then data, then pipeline (Megatron's `initialize_model_parallel`). Every layer at its
tensor-parallel shape with its all-reduces (strategies.tensor), the head and embedding split over the vocabulary
(`vocab_parallel`), sequence parallelism inside each stage (`sequence_collectives_by_layer`, `sequence_seeds`); the
layers cut into K·v chunks as Megatron cuts them (`megatron_partition`), 1F1B or interleaved, full or selective
recomputation, boundaries sent whole or partitioned; each pipeline rank's gradients all-reduced (or, with the
distributed optimizer, reduce-scattered) over the data group. Memory on the heaviest pipeline rank, with
Megatron's checkpointing under full recomputation (`checkpoint_units`, `full_recompute_bytes`). Formulas and the
checks against Korthikanti et al.'s figures: docs/method.md §14a.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import replace
from itertools import accumulate
from typing import Iterable, Sequence

from predictor.layercost import ACT_BYTES, Split, layer_signatures, update_time_s
from predictor.layout import data_network_share, nodes_spanned
from predictor.memory import MIXED_DTYPES, gradient_bytes_per_param, parameter_bytes
from predictor.plan import (PIPELINE_BOUNDARIES, PIPELINE_SCHEDULES, RECOMPUTE_GRANULARITIES, RECOMPUTE_MODULES,
                            Plan, Prediction)
from predictor.strategies.bounds import Bounds
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch, zero3_exposure
from predictor.strategies.moe_context import (attention_spans, busiest_factor, dispatch_seconds, expert_replicas,
                                              group_nodes, kv_elems, moe_layers, ring_exposed)
from predictor.strategies.moe_context import check as check_moe_cp
from predictor.strategies.pipeline import in_flight, partition, schedule_in_flight
from predictor.strategies.tensor import (SequenceSplit, TensorSplit, _producers, check_degree,
                                         collectives_by_layer, layer_split, local_parameters, sequence_split,
                                         tensor_split)


def layout_nodes(plan: Plan) -> tuple[int, int, int]:
    """(nodes a tensor group spans, nodes a data group spans, nodes two neighbouring pipeline ranks span) in
    Megatron's rank order (module docstring; context-parallel ranks between the tensor and the data ranks)."""
    t, d, K, dpn = plan.p_tensor, plan.p_data, plan.stages, plan.devices_per_node
    cp = getattr(plan, "p_context", 1)  # the search's light layouts carry no context degree
    tensor_nodes = nodes_spanned(t, 1, dpn, min(d * K * cp, dpn))
    data_nodes = nodes_spanned(d, t * cp, dpn, min(t * cp, dpn)) if d > 1 else 1
    pipe_nodes = nodes_spanned(2, t * cp * d, dpn, 1) if K > 1 else 1
    return tensor_nodes, data_nodes, pipe_nodes


def _prefix(values) -> list[float]:
    """[0, v0, v0 + v1, ...]: a range's sum as the difference of two entries."""
    return [0.0, *accumulate(values)]


def pipeline_terms(F: float, Bw: float, R: float, S: int, K: int, v: int) -> tuple[float, float]:
    """(busy seconds, bubble seconds) of one 1F1B iteration: S·(F + Bw + R) and (K - 1)·(F + Bw + R)/v."""
    step = F + Bw + R
    return S * step, (K - 1) * step / v


def p2p_count(S: int, K: int, v: int) -> int:
    """Boundary sends on the critical path: 2·(v·S + K - 2) (forward activation, backward gradient), 0 for K = 1."""
    return 2 * (v * S + K - 2) if K > 1 else 0


def boundary_send_s(ctx: Context, elems: int, act: float, t: int, tensor_nodes: int, pipe_nodes: int) -> float:
    """One boundary send between pipeline ranks (module docstring). Partitioned over t > 1 tensor ranks, with the
    tensor's elements divisible by t: each tensor rank sends its 1/t and the receiving tensor group all-gathers
    the whole tensor; otherwise (t = 1: sent whole) every tensor rank sends the whole tensor."""
    if t > 1 and elems % t == 0:
        return (ctx.collective("sendrecv", elems * act / t, 2, pipe_nodes)
                + ctx.collective("allgather", elems * act, t, tensor_nodes))
    return ctx.collective("sendrecv", elems * act, 2, pipe_nodes)


def cut_points(ctx: Context) -> list[int]:
    """Layer indices a stage may start at: 0 and every interior boundary where the fewest elements per sample cross
    (one tensor of the residual stream between transformer layers, as Megatron cuts), so no stage boundary falls
    inside a layer (where the attention scores would cross). Only boundaries with a layer owning parameters on
    either side count: a stage of the loss alone is no stage (with a vocabulary smaller than the hidden size the
    logits would otherwise be the narrowest crossing)."""
    return list(ctx.graph_cached(("3d-cut-points",), lambda: _cut_points(ctx)))


def _cut_points(ctx: Context) -> tuple[int, ...]:
    owners = [i for i, layer in enumerate(ctx.layers) if layer.params]
    first, last = (owners[0], owners[-1]) if owners else (0, ctx.n_layers - 1)
    widths = {a: ctx.crossing_elems(a) for a in range(first + 1, last + 1)}
    narrowest = min(widths.values(), default=0)
    return (0,) + tuple(a for a, w in widths.items() if w == narrowest)


def recomputed_layers(ctx: Context, ts: TensorSplit) -> range:
    """The layers full recomputation re-runs: Megatron checkpoints the transformer layers, here the span of the
    column/row pairs widened to the nearest cut points (`cut_points`), so the embeddings, the final norm, the
    language-model head and the loss are not recomputed. The whole graph when it has no pair."""
    if not ts.columns:
        return range(ctx.n_layers)
    cuts = cut_points(ctx) + [ctx.n_layers]
    first, last = min(ts.columns), max(ts.rows or ts.columns)
    return range(max(c for c in cuts if c <= first), min(c for c in cuts if c > last))


#: ops that make a column/row span an attention core (the score softmax, or one fused attention op)
ATTENTION_CORE_OPS = ("softmax", "sdpa")


def expert_column_inputs(ctx: Context, ts: TensorSplit) -> frozenset[int]:
    """The column inputs an expert linear reads first (the tensors an expert tensor group all-gathers)."""
    _, _, experts = moe_layers(ctx)
    inputs = ctx.graph_cached(("tensor-producers",), lambda: _producers(ctx.graph))
    first: dict[int, int] = {}
    for i in ts.columns:
        first.setdefault(inputs[i][0], i)
    return frozenset(x for x, reader in first.items() if reader in experts)


def module_layers(ctx: Context, modules: tuple[str, ...]) -> frozenset[int]:
    """The layers of the output-discarding modules among `modules` (Plan.recompute_modules): "layernorm" every
    layer or RMS norm, "moe_act" the experts' activation layers (the expert layers other than their linears)."""
    out: set[int] = set()
    if "layernorm" in modules:
        out.update(i for i, layer in enumerate(ctx.layers) if layer.op in ("layernorm", "rmsnorm"))
    if "moe_act" in modules:
        _, _, experts = moe_layers(ctx)
        out.update(i for i in experts if ctx.layers[i].op != "linear")
    return frozenset(out)


def attention_core(ctx: Context, ts: TensorSplit) -> frozenset[int]:
    """The layers selective recomputation re-runs (plan.RECOMPUTE_GRANULARITIES): in every span strictly between a
    column-parallel linear and the next row-parallel one that holds a softmax or a fused attention op (the QKV and
    output projections), all its layers; Megatron-LM's CoreAttention (score product, scale, mask, softmax, dropout,
    context product, the context's layout copy) is checkpointed as one function."""
    rows = sorted(ts.rows)
    core: set[int] = set()
    for c in ts.columns:
        r = next((x for x in rows if x > c), None)
        span = range(c + 1, r) if r is not None else range(0)
        if any(ctx.layers[i].op in ATTENTION_CORE_OPS for i in span):
            core.update(span)
    return frozenset(core)


def block_partition(ctx: Context, costs: list[float], stages: int) -> list[int]:
    """Stage starts: strategies.pipeline.partition over the blocks between cut points (`cut_points`)."""
    cuts = cut_points(ctx)
    bounds = list(zip(cuts, cuts[1:] + [len(costs)]))
    if len(bounds) < stages:
        return cuts
    return [cuts[j] for j in partition([sum(costs[a:z]) for a, z in bounds], stages)]


def repeated_layers(ctx: Context, ts: TensorSplit) -> list[int] | None:
    """Starts of the repeated transformer layers, plus the end of the last: the cut points inside the span of the
    column/row pairs (`recomputed_layers`) grouped by the shortest period P of their blocks' op sequences (a
    transformer layer is P = 2 blocks: attention, then MLP). None when the span does not repeat."""
    span = recomputed_layers(ctx, ts)
    if not ts.columns:
        return None
    cuts = [c for c in cut_points(ctx) if span.start <= c < span.stop] + [span.stop]
    blocks = [tuple(ctx.layers[i].op for i in range(a, z)) for a, z in zip(cuts, cuts[1:])]
    n = len(blocks)
    period = next((q for q in range(1, n + 1) if n % q == 0 and all(blocks[j] == blocks[j % q] for j in range(n))), n)
    if n // period < 2:
        return None
    return cuts[::period]


#: the losses Megatron computes over a vocabulary split across the tensor ranks
VOCAB_LOSSES = ("cross_entropy", "softmax_loss")


def vocab_parallel(ctx: Context, ts: TensorSplit) -> tuple[frozenset[int], tuple[int, ...], tuple[int, ...]]:
    """(layers split over the vocabulary, their heads' inputs, the embeddings feeding the first transformer layer)
    as Megatron runs a language model: the head is `parallel_lm_logits` (Megatron-DeepSpeed
    megatron/model/language_model.py): each tensor rank multiplies by its V/t rows of the word embedding
    (parallel_output=True: the logits stay split), its input passes copy_to_tensor_model_parallel_region
    (all-reduce of dL/dx in backward), and the loss is `vocab_parallel_cross_entropy` on the split logits
    (megatron/core/tensor_parallel/cross_entropy.py: three all-reduces of one fp32 value per token, the logit
    maximum, the target logit and the sum of exponentials). The word embedding is `VocabParallelEmbedding`
    (megatron/core/tensor_parallel/layers.py: each rank looks up its vocabulary share and the partial embeddings
    are all-reduced in forward). Here: a `linear` after the transformer layers (`recomputed_layers`) whose every
    reader is a loss over its last dimension, and that loss; an `embedding` before them."""
    span = recomputed_layers(ctx, ts)
    if not ts.columns:
        return frozenset(), (), ()
    layers, users = ctx.layers, ctx.consumers
    heads = [i for i in range(span.stop, ctx.n_layers) if layers[i].op == "linear" and users.get(i)
             and all(layers[u].op in VOCAB_LOSSES for u in users[i])]
    split = frozenset(heads) | frozenset(u for i in heads for u in users[i])
    embeds = tuple(i for i in range(span.start) if layers[i].op == "embedding"
                   and layers[i].output_shape[-1] == layers[heads[0]].input_shape[-1]) if heads else ()
    return split, tuple(heads), embeds[:1]


def sequence_seeds(ctx: Context, ts: TensorSplit) -> frozenset[int]:
    """The layers whose outputs sequence parallelism splits over tokens before any row layer: the embeddings before
    the transformer layers (Megatron's Embedding scatters its output over the sequence before the embedding dropout
    when --sequence-parallel is set, so the dropout, and the first layer's norm and residual, run on 1/t of the
    tokens)."""
    span = recomputed_layers(ctx, ts)
    return frozenset(i for i in range(span.start) if ctx.layers[i].op == "embedding")


def megatron_partition(ctx: Context, ts: TensorSplit, chunks: int) -> list[int] | None:
    """Chunk starts as Megatron lays out a pipeline: the L transformer layers (`repeated_layers`) in chunks of
    equal count, whatever their time, the embeddings in the first chunk, the final norm, language-model head and
    loss in the last. Megatron-DeepSpeed's GPTModelPipe (megatron/model/gpt_model.py) builds its DeepSpeed
    PipelineModule with partition_method='type:transformer' (deepspeed/runtime/pipe/module.py _partition_layers:
    weight 1 for each ParallelTransformerLayerPipe, 0 for the rest, ds_utils.partition_balanced), so every stage
    holds L / K transformer layers and the zero-weight embedding and head fall to the first and last stage;
    Megatron-LM's ParallelTransformer gives each pipeline rank num_layers // pipeline size layers (asserting
    divisibility) and puts the embedding on the first rank and the head on the last. When chunks does not divide
    L the first L mod chunks chunks take one layer more. None when the graph has no repeated layers (then
    block_partition balances on time) or fewer than `chunks` of them (evaluate rejects that plan: Megatron-LM
    asserts that the pipeline size divides num_layers, so no chunk is left without a transformer layer)."""
    starts = ctx.graph_cached(("3d-repeated",), lambda: repeated_layers(ctx, ts))
    if starts is None or len(starts) - 1 < chunks:
        return None
    n_layers, (q, r) = len(starts) - 1, divmod(len(starts) - 1, chunks)
    firsts = [k * q + min(k, r) for k in range(chunks)]
    assert firsts[-1] < n_layers
    return [0] + [starts[j] for j in firsts[1:]]


def rank_saved_bytes(ctx: Context, dtype: str, starts: list[int], K: int, region: frozenset[int],
                     core: frozenset[int], t: int, key=None, discard: frozenset[int] = frozenset()) -> list[float]:
    """Per pipeline rank, bytes per sample of the saved tensors it keeps (all its chunks'): a tensor is kept by every
    rank holding one of its savers (chunk j on rank j mod K), at 1/t when a split layer (`region`) makes it, not at all
    when selective recomputation makes and reads it inside an attention core (`core`). The tensors saved by one layer
    are summed per layer once (`_saved_layers`, cached under `key`, which must identify dtype, region, core and t),
    each rank's chunks then read from their prefix sums; a tensor several layers save is added to each of their
    ranks."""
    prefix, multi = _saved_layers(ctx, dtype, region, core, t, key, discard)
    bounds = list(zip(starts, starts[1:] + [ctx.n_layers]))
    totals = [sum(prefix[z] - prefix[a] for a, z in bounds[k::K]) for k in range(K)]
    for savers, size in multi:
        for k in {(bisect_right(starts, s) - 1) % K for s in savers}:
            totals[k] += size
    return totals


def _saved_layers(ctx: Context, dtype: str, region: frozenset[int], core: frozenset[int], t: int, key=None,
                  discard: frozenset[int] = frozenset()):
    """(prefix sums over the layers of the bytes per sample of the tensors each layer alone saves, [(savers, bytes)]
    of the tensors several layers save), as `rank_saved_bytes` weighs them; the outputs of `discard`'s layers
    (output-discarding recomputation, Plan.recompute_modules) not at all."""
    def build():
        single = [0.0] * ctx.n_layers
        multi = []
        for x in ctx.saved:
            inside = x.producer in core and all(s in core for s in x.savers)
            kept = 0.0 if inside or x.producer in discard else 1.0
            size = x.size_bytes(dtype) * ((1.0 / t if x.producer in region else 1.0) * kept)
            savers = set(x.savers)
            if len(savers) == 1:
                single[next(iter(savers))] += size
            elif size:
                multi.append((tuple(savers), size))
        return _prefix(single), multi
    return ctx.graph_cached(("3d-saved-layers", key), build) if key is not None else build()


def sequence_collectives_by_layer(ctx: Context, ts: TensorSplit, seq: SequenceSplit, size, p: int, nodes: int,
                                  experts: frozenset[int] = frozenset(), etp: int = 0
                                  ) -> tuple[dict[int, float], dict[int, float]]:
    """Sequence parallelism's collectives per layer ({layer: forward seconds}, {layer: backward seconds}), the terms
    of strategies.tensor's sequence-parallel sums placed on the layer that waits for them: a row layer's
    reduce-scatter of its output (forward) and all-gather of dL/dy (backward); at the first column layer reading a
    tensor, the all-gather of that token-split input (forward) and the reduce-scatter of its dL/dx (backward; an
    all-reduce when the input is replicated); at every column layer reading a token-split input, that input
    all-gathered again in backward for the weight gradient (Megatron-LM keeps only its 1/t share:
    LinearWithGradAccumulationAndAsyncCommunication.backward re-gathers it; counted exposed, as Korthikanti et al.'s
    Table 4 shows: with sequence parallelism the layer's backward is no faster, 11.8 vs 11.9 ms, though its norms
    and dropouts run on 1/t of the tokens); at the first replicated reader of a token-split tensor its all-gather
    (forward); at the first token-split layer joined by a replicated tensor the all-gather of its gradient
    (backward). size(x) = bytes of tensor x on one rank before the split. An expert layer's (`experts`, at an
    expert tensor degree etp below p: Plan.p_expert_tensor) run over its etp ranks, on etp/p of the tokens."""
    fwd: dict[int, float] = {}
    bwd: dict[int, float] = {}

    def add(into: dict[int, float], i: int, seconds: float) -> None:
        into[i] = into.get(i, 0.0) + seconds

    folded = experts if 0 < etp < p else frozenset()

    def coll(op: str, nbytes: float, group: int, on: int, layer: int) -> float:
        if layer in folded:
            return ctx.collective(op, nbytes * etp / group, etp, on)
        return ctx.collective(op, nbytes, group, on)

    for i in ts.rows:
        add(fwd, i, coll("reduce_scatter", size(i), p, nodes, i))
        add(bwd, i, coll("allgather", size(i), p, nodes, i))
    inputs = ctx.graph_cached(("tensor-producers",), lambda: _producers(ctx.graph))
    first_reader: dict[int, int] = {}
    for i in ts.columns:
        first_reader.setdefault(inputs[i][0], i)
    for x in ts.column_inputs:
        if x < 0:
            continue
        reader = first_reader[x]
        if x in seq.tokens:
            add(fwd, reader, coll("allgather", size(x), p, nodes, reader))
            add(bwd, reader, coll("reduce_scatter", size(x), p, nodes, reader))
        else:
            add(bwd, reader, coll("allreduce", size(x), p, nodes, reader))
    for i in ts.columns:  # each column layer re-gathers its saved token-split input for its weight gradient
        x = inputs[i][0]
        if x in seq.tokens:
            add(bwd, i, coll("allgather", size(x), p, nodes, i))
    columns = set(ts.columns)
    for x in seq.exits:
        reader = min(u for u in ctx.consumers[x] if u not in seq.tokens and u not in columns)
        add(fwd, reader, coll("allgather", size(x), p, nodes, reader))
    for x in seq.entries:
        reader = min(u for u in ctx.consumers[x] if u in seq.tokens)
        add(bwd, reader, coll("allgather", size(x), p, nodes, reader))
    return fwd, bwd


def gather_stall_s(gather_s: float, chunks: list[list[tuple[float, float]]], K: int) -> float:
    """How long a rank's next step waits for its updated parameters when their all-gather (gather_s in all, spread
    over the layers by parameter count, in the order the forward needs them) runs beside the forward passes
    (Megatron-Core's --overlap-param-gather): the largest lead of the gather over the first use, max_i (G_i - N_i),
    G_i the gather time up to and including layer i, N_i when the first micro-batch reaches layer i. chunks: per
    model chunk in order, (parameters, forward seconds per micro-batch) of each layer; under the interleaved
    schedule a rank runs K micro-batches through each chunk before the next (method.md §14a)."""
    total = sum(p for chunk in chunks for p, _ in chunk)
    if total <= 0:
        return 0.0
    stall = gathered = start = 0.0
    for chunk in chunks:
        reached = start
        for params, fwd_s in chunk:
            gathered += gather_s * params / total
            if params:
                stall = max(stall, gathered - reached)
            reached += fwd_s
        start += K * (reached - start) if len(chunks) > 1 else reached - start
    return stall


def zero1_parameter_bytes(params: float, plan: Plan, shard: int | None = None) -> tuple[float, float, float]:
    """(weights, grads, optimizer state) of `params` parameters on one rank under Megatron's distributed optimizer
    (ZeRO stage 1 over the p_data replicas, or `shard` of them): the optimizer state and, under mixed precision, the
    fp32 master weights sharded 1/p_data; the compute copy of the weights and the gradients whole (strategies.data's
    stage 1)."""
    shard = plan.p_data if shard is None else shard
    weights, grads, optimizer = parameter_bytes(params, plan.dtype, plan.optimizer, plan.mixed_precision)
    master = weights - params * compute_weight_bytes(plan.dtype) if plan.dtype in MIXED_DTYPES else 0.0
    return weights - master + master / shard, grads, optimizer / shard


def compute_weight_bytes(dtype: str) -> float:
    """Bytes per parameter of the copy the layers compute with (and the distributed optimizer all-gathers)."""
    return 2.0 if dtype in MIXED_DTYPES else 4.0


def checkpoint_units(ctx: Context, ts: TensorSplit) -> list[tuple[int, int]]:
    """The units Megatron's full recomputation checkpoints, as (first layer, end): each transformer layer
    (`repeated_layers`; Megatron-LM's --recompute-method uniform with --recompute-num-layers 1, Megatron-DeepSpeed's
    --checkpoint-activations: one checkpoint per ParallelTransformerLayer), or, in a graph whose layers do not repeat,
    each block between cut points of the recomputed span (`recomputed_layers`)."""
    starts = repeated_layers(ctx, ts)
    if starts is None:
        span = recomputed_layers(ctx, ts)
        starts = [c for c in cut_points(ctx) if span.start <= c < span.stop] + [span.stop]
    return list(zip(starts, starts[1:]))


def full_recompute_bytes(ctx: Context, dtype: str, starts: list[int], K: int, units: list[tuple[int, int]],
                         region: frozenset[int], t: int, key=None) -> tuple[list[float], list[float], list[float]]:
    """Per pipeline rank, bytes per sample under full recomputation (Korthikanti et al. 2022, §4.3 and Table 2):
    (checkpoints: the input of every unit the rank runs, `checkpoint_units`, 2·s·b·h bytes per transformer layer in
    16-bit, at 1/t when a split layer makes it; kept: the saved tensors of its layers outside the units (embeddings,
    final norm, head, loss), kept as without recomputation; recomputed: its largest unit's saved tensors, which the
    backward of one micro-batch rebuilds one unit at a time). Chunk j of `starts` runs on rank j mod K. What does not
    depend on the cut (each unit's checkpoint and saved bytes, the kept bytes per layer) is computed once per `key`,
    which must identify dtype, units, region and t."""
    def rank(i: int) -> int:
        return (bisect_right(starts, i) - 1) % K

    unit_checkpoints, unit_bytes, kept_prefix, kept_multi = _full_recompute_layers(ctx, dtype, units, region, t, key)
    checkpoints: list[float] = [0] * K
    recomputed: list[float] = [0.0] * K
    for (a, _), ck, size in zip(units, unit_checkpoints, unit_bytes):
        k = rank(a)
        checkpoints[k] += ck
        recomputed[k] = max(recomputed[k], size)
    bounds = list(zip(starts, starts[1:] + [ctx.n_layers]))
    kept = [sum(kept_prefix[z] - kept_prefix[a] for a, z in bounds[k::K]) for k in range(K)]
    for savers, size in kept_multi:
        for k in {rank(s) for s in savers}:
            kept[k] += size
    return checkpoints, kept, recomputed


def _full_recompute_layers(ctx: Context, dtype: str, units: list[tuple[int, int]], region: frozenset[int], t: int,
                           key=None):
    """(per unit its checkpointed input's bytes, per unit the bytes its layers save, prefix sums over the layers of
    the bytes of tensors one layer outside the units alone saves, [(savers outside, bytes)] of the others)."""
    def build():
        act = ACT_BYTES[dtype]
        unit_starts = [a for a, _ in units]
        first, stop = (units[0][0], units[-1][1]) if units else (0, 0)
        checkpoints = [sum(ctx.tensor_elems(x) * act * (1.0 / t if x in region else 1.0) for x in ctx.crossing(a))
                       for a, _ in units]
        unit_bytes: list[float] = [0.0] * len(units)
        single = [0.0] * ctx.n_layers
        multi = []
        for x in ctx.saved:
            size = x.size_bytes(dtype) * (1.0 / t if x.producer in region else 1.0)
            for u in {bisect_right(unit_starts, s) - 1 for s in x.savers if first <= s < stop}:
                unit_bytes[u] += size
            outside = {s for s in x.savers if not first <= s < stop}
            if len(outside) == 1:
                single[next(iter(outside))] += size
            elif outside:
                multi.append((tuple(outside), size))
        return checkpoints, unit_bytes, _prefix(single), multi
    return ctx.graph_cached(("3d-full-layers", key), build) if key is not None else build()


def tensor_layout(ctx: Context, ts: TensorSplit, t: int, sp: bool):
    """(layers split over the vocabulary, the heads, the embeddings, the sequence split or None) of Megatron's
    layout at tensor degree t (`vocab_parallel`, `sequence_seeds`), with sequence parallelism when sp and t > 1."""
    vocab, heads, embeds = ctx.graph_cached(("3d-vocab",), lambda: vocab_parallel(ctx, ts)) if t > 1 else (
        frozenset(), (), ())
    seq: SequenceSplit | None = ctx.graph_cached(("3d-sequence-split",), lambda: sequence_split(
        ctx.graph, ts, sequence_seeds(ctx, ts))) if sp and t > 1 else None
    return vocab, heads, embeds, seq


def overlap_exposed_s(comm_s: float, gemm_s: float, t: int) -> float:
    """What stays exposed of a tensor-parallel collective run in t ring steps beside its GEMM in t chunks
    (Megatron-Core's --tp-comm-overlap, Transformer Engine's userbuffers): the first step waits, each later step
    hides behind a chunk of the GEMM: c/t + (t-1)/t * max(0, c - g) (method.md §14a)."""
    return comm_s / t + (t - 1) / t * max(0.0, comm_s - gemm_s)


def combined_share(S: int, K: int, v: int, rank: int) -> float:
    """Share of a rank's S x v chunk passes that Megatron-Core's combined 1F1B runs beside a pass of another
    micro-batch (docs/method.md §14c): all but the warm-up forwards, and as many cool-down backwards, which run alone;
    one of each without pipelining; with interleaving schedules.py's warm-up, one more with the overlap: the
    chunk micro-batches the interleaved schedule holds (pipeline.schedule_in_flight), at most all of them."""
    total = S * v
    warm = 1 if K == 1 else schedule_in_flight("interleaved", K, S, v, rank)
    return (total - warm) / total


def a2a_overlap_s(a2a_f: Sequence[float], a2a_b: Sequence[float], times: Sequence[tuple[float, float]],
                  blocks: Iterable[Sequence[int]], S: int, share: float, overlap_efficiency: float
                  ) -> tuple[float, float]:
    """(exposed_s, hidden_s) of a rank's expert all-to-alls over S micro-batches under the combined 1F1B schedule
    (Megatron-Core's --overlap-moe-expert-parallel-comm; docs/method.md §14c). blocks: the rank's layers, one list per
    transformer layer (`moe_blocks`). In a combined pass a transformer layer's forward all-to-alls hide behind the
    same layer's backward compute (attention and MLP) of the other micro-batch, its backward all-to-alls behind that
    layer's forward compute, min(all-to-all, compute) each; `share` of the passes are combined (combined_share), the
    rest run alone, exposed; the hidden part slows the compute beside it by 1 - overlap_efficiency, as every
    overlapped collective does (strategies.data.zero3_exposure)."""
    total = hideable = 0.0
    for block in blocks:
        comm_f, comm_b = sum(a2a_f[i] for i in block), sum(a2a_b[i] for i in block)
        total += comm_f + comm_b
        hideable += (min(comm_f, sum(times[i][1] for i in block)) + min(comm_b, sum(times[i][0] for i in block)))
    hidden = share * S * hideable
    slowdown = (1.0 - overlap_efficiency) * hidden
    return S * total - hidden + slowdown, hidden - slowdown


def moe_blocks(combine: Sequence[int], layers: Iterable[int]) -> list[list[int]]:
    """`layers` (a rank's) cut after each combine into transformer layers: what lies between two combines is one
    layer's attention, router, dispatch, experts and combine; the rest (embedding, head) a block without
    all-to-alls."""
    cuts, out, block = set(combine), [], []
    for i in sorted(layers):
        block.append(i)
        if i in cuts:
            out.append(block)
            block = []
    return out + ([block] if block else [])


def _overlapped(ts: TensorSplit, t: int, times, fwd, bwd, keep_fwd=None, keep_bwd=None):
    """The layer terms with each column/row layer's collectives overlapped with its own GEMM (overlap_exposed_s);
    keep_*: per-layer seconds of those lists that are not tensor-parallel (all-to-alls, the ring) and stay."""
    gemms = set(ts.rows) | set(ts.columns)
    keep_fwd, keep_bwd = keep_fwd or [0.0] * len(fwd), keep_bwd or [0.0] * len(bwd)

    def hide(comm, keep, k):
        return [overlap_exposed_s(c - x, times[i][k], t) + x if i in gemms else c
                for i, (c, x) in enumerate(zip(comm, keep))]
    return times, hide(fwd, keep_fwd, 0), hide(bwd, keep_bwd, 1)


def layer_terms(ctx: Context, ts: TensorSplit, dtype: str, t: int, m: int, tensor_nodes: int, sp: bool,
                moe_cp: tuple = (), overlap: bool = False):
    """Per layer, at micro-batch m on one of t tensor ranks: ((forward, backward) seconds, forward collective
    seconds, backward collective seconds), cached on ctx (the search's bounds and `evaluate` share them). moe_cp:
    (cp, ep, nodes of the context group, of the expert group) when either degree is above 1 (`moe_cp_terms`).
    overlap: the column/row layers' collectives overlapped with their GEMMs (Plan.tp_comm_overlap, with SP)."""
    sp = sp and t > 1
    if overlap and sp:
        def hidden():
            if moe_cp:
                times, fwd, bwd, a2a_f, a2a_b, ring_f, ring_b = moe_cp_terms(ctx, ts, dtype, t, m, tensor_nodes, sp,
                                                                           *moe_cp)
                return _overlapped(ts, t, times, fwd, bwd, [a + r for a, r in zip(a2a_f, ring_f)],
                                   [a + r for a, r in zip(a2a_b, ring_b)])
            return _overlapped(ts, t, *layer_terms(ctx, ts, dtype, t, m, tensor_nodes, sp))
        return ctx.cached(("3d-layers-overlap", dtype, t, m, tensor_nodes, moe_cp), hidden)
    if moe_cp:
        return ctx.cached(("3d-layers", dtype, t, m, tensor_nodes, sp, moe_cp),
                          lambda: moe_cp_terms(ctx, ts, dtype, t, m, tensor_nodes, sp, *moe_cp)[:3])

    def per_layer():
        vocab, heads, embeds, seq = tensor_layout(ctx, ts, t, sp)
        tokens = seq.tokens if seq is not None else frozenset()
        coster, split_of = ctx.coster(dtype), layer_split(ts, t, m, tokens)
        by_vocab, whole = Split(m, filter_div=t), Split(m)
        times = [coster.times(i, by_vocab if i in vocab else whole if i in embeds else split_of(i))
                 for i in range(ctx.n_layers)]
        _, fwd_c, bwd_c = _collectives(ctx, ts, dtype, t, m, tensor_nodes, sp)
        return times, [fwd_c.get(i, 0.0) for i in range(ctx.n_layers)], [bwd_c.get(i, 0.0) for i in range(ctx.n_layers)]

    return ctx.cached(("3d-layers", dtype, t, m, tensor_nodes, sp), per_layer)


def search_totals(ctx: Context, ts: TensorSplit, dtype: str, t: int, m: int, tensor_nodes: int, sp: bool,
                  overlap: bool = False) -> tuple[float, float, float]:
    """For the search's lower bounds (predictor.search_fast), at micro-batch m on t tensor ranks: (every layer's
    forward + backward + tensor collectives, the forward (with collectives) selective recomputation re-runs, the
    one full recomputation re-runs), summed over the whole graph. The slowest pipeline rank's F + Bw + R is at least
    1/K of the first plus one of the others. overlap (with SP, in one node): a column/row layer's collective counts
    its least exposed part, 1/t of it (overlap_exposed_s)."""
    sp = sp and t > 1
    overlap = overlap and sp and tensor_nodes == 1

    def totals():
        # the layers' times once per (signature, split) group (LayerCoster caches them so: the same numbers as
        # layer_terms, summed in another order), the collectives from the same per-layer maps
        coster, groups = ctx.coster(dtype), _split_groups(ctx, ts, t, sp)
        splits = (Split(m), Split(m, filter_div=t), Split(m, channel_div=t))
        every = core = span = 0.0
        for (first, cls), (n_all, n_core, n_span) in groups.items():
            f, b = coster.times(first, splits[cls])
            every += n_all * (f + b)
            core += n_core * f
            span += n_span * f
        _, fwd_c, bwd_c = _collectives(ctx, ts, dtype, t, m, tensor_nodes, sp)
        if overlap:
            gemms = set(ts.rows) | set(ts.columns)
            fwd_c, bwd_c = ({i: c / t if i in gemms else c for i, c in x.items()} for x in (fwd_c, bwd_c))
        return (every + sum(fwd_c.values()) + sum(bwd_c.values()),
                core + sum(fwd_c.get(i, 0.0) for i in ctx.graph_cached(("3d-attention-core",), lambda: attention_core(
                    ctx, ts))), span + sum(fwd_c.get(i, 0.0) for i in ctx.graph_cached(
                        ("3d-recomputed",), lambda: recomputed_layers(ctx, ts))))
    return ctx.cached(("3d-search-totals", dtype, t, m, tensor_nodes, sp, overlap), totals)


def _split_groups(ctx: Context, ts: TensorSplit, t: int, sp: bool) -> dict[tuple[int, int], tuple[int, int, int]]:
    """{(first layer of a signature, split class): (layers, of them in attention cores, in the recomputed span)}
    with the split classes of `layer_terms` (0 whole, 1 features / vocabulary / tokens at 1/t, 2 inputs at 1/t)."""
    def build():
        vocab, _, embeds, seq = tensor_layout(ctx, ts, t, sp)
        tokens = seq.tokens if seq is not None else frozenset()
        rows, region = set(ts.rows), ts.split
        _, _, signature = ctx.graph_cached(("layer-signatures",), lambda: layer_signatures(ctx.graph))
        core = ctx.graph_cached(("3d-attention-core",), lambda: attention_core(ctx, ts))
        span = ctx.graph_cached(("3d-recomputed",), lambda: recomputed_layers(ctx, ts))
        first: dict[int, int] = {}
        out: dict[tuple[int, int], list[int]] = {}
        for i in range(ctx.n_layers):
            if t <= 1 or (i in embeds and i not in vocab):
                cls = 0
            elif i in vocab or i in region or (i not in rows and i in tokens):
                cls = 1
            elif i in rows:
                cls = 2
            else:
                cls = 0
            key = (first.setdefault(signature[i], i), cls)
            counts = out.setdefault(key, [0, 0, 0])
            counts[0] += 1
            counts[1] += i in core
            counts[2] += i in span
        return {k: tuple(v) for k, v in out.items()}
    return ctx.graph_cached(("3d-split-groups", t, sp and t > 1), build)


def moe_cp_terms(ctx: Context, ts: TensorSplit, dtype: str, t: int, m: int, tensor_nodes: int, sp: bool, cp: int,
                 ep: int, cp_nodes: int, ep_nodes: int, etp: int = 0):
    """`layer_terms` with context parallelism cp and expert parallelism ep (strategies.moe_context, method.md §14b),
    and, per layer, the all-to-all and the ring seconds its collectives hold: (times, forward collectives, backward
    collectives, forward all-to-all, backward all-to-all, forward ring, backward ring), cached on ctx. Every layer
    at 1/cp of the tokens (an attention block as cp blocks), the expert layers at ep's share of the experts and the
    busiest expert rank's tokens; each dispatch and combine an all-to-all forward and backward. etp: the expert
    tensor degree (0: t); below t an expert linear runs whole on etp/t of the tensor group's routed tokens, its
    columns or rows over etp ranks (Megatron-Core's parallel folding, method.md §14b)."""
    etp = etp or t

    def build():
        vocab, heads, embeds, seq = tensor_layout(ctx, ts, t, sp)
        tokens = seq.tokens if seq is not None else frozenset()
        dispatch, combine, experts = moe_layers(ctx)
        coster, split_of = ctx.coster(dtype), layer_split(ts, t, m, tokens)
        by_vocab, whole = Split(m, filter_div=t), Split(m)
        fold = t // etp  # the expert linears' tokens: 1/fold of what the tensor group gathers
        rows = frozenset(ts.rows)

        def split(i: int) -> Split:
            base = by_vocab if i in vocab else whole if i in embeds else split_of(i)
            if fold > 1 and i in experts and ctx.layers[i].op == "linear" and ctx.layers[i].groups > 1:
                base = Split(m, channel_div=etp) if i in rows else Split(m, filter_div=etp)
                return base._replace(seq_div=cp * fold, expert_div=ep)
            return base._replace(seq_div=cp, expert_div=ep if i in experts else 1)

        times = [coster.times(i, split(i)) for i in range(ctx.n_layers)]
        act, n = ctx.act_size(dtype), ctx.n_layers
        a2a_f, a2a_b, ring_f, ring_b = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
        for i in dispatch:  # each rank's routed tokens; the busiest expert rank paces the experts and the exchange
            layer = ctx.layers[i]
            busiest = busiest_factor(m * layer.output_shape[0] / cp / fold, ep, layer.capacity_factor)
            size = m * layer.output_elems * act / cp / (t if i in tokens else 1) * busiest
            seconds = dispatch_seconds(ctx, layer, ep, size, ep_nodes)
            for j in (i, next(c for c in combine if c > i)):  # dispatch, then its combine: forward and backward
                a2a_f[j] += seconds
                a2a_b[j] += seconds
            for j in experts:
                if dispatch[bisect_right(dispatch, j) - 1] == i:
                    times[j] = (times[j][0] * busiest, times[j][1] * busiest)
        for span in (attention_spans(ctx, ts.rows, ts.columns) if cp > 1 else ()):
            block_f = sum(times[i][0] for i in span) / cp
            block_b = sum(times[i][1] for i in span) / cp
            kv = m * kv_elems(ctx, span) * act / cp / t
            ring_f[span[0]], ring_b[span[0]] = ring_exposed(ctx, cp, block_f, block_b, kv, cp_nodes)
        _, fwd_c, bwd_c = _collectives(ctx, ts, dtype, t, m, tensor_nodes, sp, cp, experts, etp)
        fwd = [fwd_c.get(i, 0.0) + a2a_f[i] + ring_f[i] for i in range(n)]
        bwd = [bwd_c.get(i, 0.0) + a2a_b[i] + ring_b[i] for i in range(n)]
        return times, fwd, bwd, a2a_f, a2a_b, ring_f, ring_b
    return ctx.cached(("3d-moe-cp", dtype, t, m, tensor_nodes, sp, cp, ep, cp_nodes, ep_nodes, etp), build)


def busiest(ctx: Context, plan: Plan, m: int) -> float:
    """The busiest expert rank's routed tokens over the mean at micro-batch m (moe_context.busiest_factor; 1 for a
    dense model or ep = 1)."""
    dispatch, _, _ = moe_layers(ctx)
    if not dispatch or plan.p_expert <= 1:
        return 1.0
    layer = ctx.layers[dispatch[0]]
    fold = plan.p_tensor // plan.expert_tensor  # folded expert ranks: each routes 1/fold of the gathered tokens
    return busiest_factor(m * layer.output_shape[0] / plan.p_context / fold, plan.p_expert, layer.capacity_factor)


def moe_saved_extra(ctx: Context, plan: Plan, starts: list[int], region: frozenset[int], t: int, m: int
                    ) -> list[float]:
    """Per pipeline rank, bytes per sample the busiest expert rank saves beyond the mean: (busiest - 1) x the saved
    tensors the dispatch and the expert layers make (at 1/t when split over the tensor ranks)."""
    dispatch, _, experts = moe_layers(ctx)
    excess = busiest(ctx, plan, m) - 1.0
    K = plan.stages
    out = [0.0] * K
    made = set(dispatch) | experts
    for x in ctx.saved:
        if x.producer in made:
            size = excess * x.size_bytes(plan.dtype) * (1.0 / t if x.producer in region else 1.0)
            for k in {(bisect_right(starts, s) - 1) % K for s in x.savers}:
                out[k] += size
    return out


def _collectives(ctx: Context, ts: TensorSplit, dtype: str, t: int, m: int, tensor_nodes: int, sp: bool,
                 cp: int = 1, experts: frozenset[int] = frozenset(), etp: int = 0):
    """(the sequence split or None, {layer: forward collective seconds}, {layer: backward ...}) of `layer_terms`;
    with context parallelism cp every tensor holds 1/cp of its tokens; the expert layers' over etp ranks
    (sequence_collectives_by_layer)."""
    act = ctx.act_size(dtype)
    vocab, heads, embeds, seq = tensor_layout(ctx, ts, t, sp)
    size = lambda x: m * ctx.tensor_elems(x) * act / cp  # noqa: E731 - bytes of tensor x on one rank
    if t <= 1:
        fwd_c, bwd_c = {}, {}
    elif seq is not None:
        fwd_c, bwd_c = sequence_collectives_by_layer(ctx, ts, seq, size, t, tensor_nodes, experts, etp)
    else:
        fwd_c, bwd_c = collectives_by_layer(ctx, ts, size, t, tensor_nodes)
    for i in embeds:  # VocabParallelEmbedding: partial lookups all-reduced in forward (then sliced under SP)
        fwd_c[i] = fwd_c.get(i, 0.0) + ctx.collective("allreduce", size(i), t, tensor_nodes)
    for i in heads:  # dL/dx of the head's input all-reduced (SP: reduce-scattered, its input all-gathered in
        # forward as a token-split tensor's exit); 3 fp32 all-reduces per token in the loss
        n_tokens = math.prod(ctx.layers[i].input_shape[:-1])
        head_input = size(ctx.producer(ctx.layers[i].inputs[0]))
        bwd_c[i] = bwd_c.get(i, 0.0) + ctx.collective("reduce_scatter" if seq is not None else "allreduce",
                                                      head_input, t, tensor_nodes)
        if seq is not None:  # parallel_lm_logits re-gathers its token-split input for the weight gradient
            bwd_c[i] += ctx.collective("allgather", head_input, t, tensor_nodes)
        fwd_c[i] = fwd_c.get(i, 0.0) + 3 * ctx.collective("allreduce", m * n_tokens * 4.0 / cp, t, tensor_nodes)
    return seq, fwd_c, bwd_c


def saved_totals(ctx: Context, ts: TensorSplit, dtype: str, t: int, sp: bool) -> tuple[float, float, float]:
    """Per sample, bytes the model keeps for backward on one of t tensor ranks with every layer on one pipeline
    rank (each tensor once): (without recomputation, with selective recomputation, with full recomputation: the
    checkpointed layer inputs and the tensors of the layers outside them). For the search's memory bounds: the
    heaviest of K pipeline ranks keeps at least 1/K of it per micro-batch it holds."""
    def totals():
        vocab, _, _, seq = tensor_layout(ctx, ts, t, sp)
        tokens = seq.tokens if seq is not None else frozenset()
        region = ts.split | vocab | tokens if t > 1 else frozenset()
        core = ctx.graph_cached(("3d-attention-core",), lambda: attention_core(ctx, ts))
        units = ctx.graph_cached(("3d-checkpoint-units",), lambda: checkpoint_units(ctx, ts))
        split = sp and t > 1
        checkpoints, kept, _ = full_recompute_bytes(ctx, dtype, [0], 1, units, region, t, key=(dtype, t, split))
        return (rank_saved_bytes(ctx, dtype, [0], 1, region, frozenset(), t, key=(dtype, t, False, split))[0],
                rank_saved_bytes(ctx, dtype, [0], 1, region, core, t, key=(dtype, t, True, split))[0],
                checkpoints[0] + kept[0])
    return ctx.graph_cached(("3d-saved-totals", dtype, t, sp and t > 1), totals)


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    t, K, S = plan.p_tensor, plan.stages, plan.micro_batches
    v = plan.virtual_stages if plan.schedule == "interleaved" else 1
    if plan.schedule not in PIPELINE_SCHEDULES or plan.schedule == "gpipe":
        raise Infeasible(f"data+tensor+pipeline runs Megatron's 1f1b or interleaved schedule, not {plan.schedule!r}")
    if plan.schedule == "interleaved" and (v < 2 or S % K):
        raise Infeasible(f"interleaved 1F1B needs >= 2 virtual stages and micro-batches ({S}) a multiple of the "
                         f"{K} stages")
    fsdp = plan.zero_stage == 3 and K == 1 and plan.p_context == 1 and plan.p_expert == 1  # FSDP x tensor parallelism
    if plan.zero_stage not in (0, 1) and not fsdp:
        raise Infeasible(f"ZeRO stage {plan.zero_stage} with pipelines: Megatron's distributed optimizer is stage 1 "
                         f"(DeepSpeed refuses stages 2 and 3 with pipeline parallelism); stage 3 (FSDP) runs with "
                         f"tensor parallelism on one stage, without context or expert parallelism")
    if plan.recompute_granularity not in RECOMPUTE_GRANULARITIES:
        raise Infeasible(f"unknown recompute granularity {plan.recompute_granularity!r} "
                         f"(known: {', '.join(RECOMPUTE_GRANULARITIES)})")
    unknown = [name for name in plan.recompute_modules if name not in RECOMPUTE_MODULES]
    if unknown:
        raise Infeasible(f"unknown recompute module {unknown[0]!r} (known: {', '.join(RECOMPUTE_MODULES)})")
    if plan.pipeline_boundary not in PIPELINE_BOUNDARIES:
        raise Infeasible(f"unknown pipeline boundary {plan.pipeline_boundary!r} "
                         f"(known: {', '.join(PIPELINE_BOUNDARIES)})")
    b = local_batch(plan)
    if K * v > ctx.n_layers:
        raise Infeasible(f"{K * v} stages > {ctx.n_layers} layers")
    if b % S:
        raise Infeasible(f"{b} samples per pipeline not divisible into {S} micro-batches")
    m = b // S
    ts: TensorSplit = ctx.graph_cached(("tensor-split",), lambda: tensor_split(ctx.graph))
    if t > 1:
        check_degree(ctx, ts, t)
    dtype, act = plan.dtype, ctx.act_size(plan.dtype)
    tensor_nodes, d_nodes, pipe_nodes = layout_nodes(plan)

    sp = plan.sequence_parallel and t > 1
    cp, ep = plan.p_context, plan.p_expert
    check_moe_cp(ctx, plan, t, sp)
    groups = group_nodes(plan) if cp > 1 or ep > 1 else None  # context and expert groups (strategies.moe_context)
    etp = plan.expert_tensor
    moe_cp = (cp, ep, groups["context"][0], groups["expert"][0], etp) if groups else ()
    vocab, heads, embeds, seq = tensor_layout(ctx, ts, t, sp)
    tokens = seq.tokens if seq is not None else frozenset()
    # the stack overlaps where the layout lets it: with SP (Megatron-Core), inside one node (userbuffers: CUDA IPC)
    overlap = plan.tp_comm_overlap and sp and tensor_nodes == 1
    times, fwd_comm, bwd_comm = layer_terms(ctx, ts, dtype, t, m, tensor_nodes, sp, moe_cp, overlap)
    costs = [f + b_ + cf + cb for (f, b_), cf, cb in zip(times, fwd_comm, bwd_comm)]
    layers = ctx.graph_cached(("3d-repeated",), lambda: repeated_layers(ctx, ts))
    if layers is not None and K * v > len(layers) - 1:
        raise Infeasible(f"{K * v} pipeline chunks > {len(layers) - 1} transformer layers (Megatron gives every "
                         f"chunk whole layers)")
    starts = ctx.cached(("3d-cut", dtype, t, m, tensor_nodes, K * v, sp, overlap) + moe_cp, lambda: (
        megatron_partition(ctx, ts, K * v) or block_partition(ctx, costs, K * v)))
    if len(starts) < K * v:
        raise Infeasible(f"{K * v} stages > {len(starts)} blocks between the graph's narrowest cut points")
    bounds = list(zip(starts, starts[1:] + [ctx.n_layers]))
    ranks = [[i for j in range(k, K * v, K) for i in range(*bounds[j])] for k in range(K)]
    chunks_of = [bounds[k::K] for k in range(K)]  # rank k runs chunks k, k + K, ...

    def rank_sum(prefix, k):  # a per-layer quantity summed over rank k's chunks, from its prefix sums
        return sum(prefix[z] - prefix[a] for a, z in chunks_of[k])

    selective = plan.recompute and plan.recompute_granularity == "selective"
    modules = plan.selective_modules
    core = ctx.graph_cached(("3d-attention-core",), lambda: attention_core(ctx, ts)) if "core_attn" in modules \
        else frozenset()
    discard = ctx.graph_cached(("3d-module-layers", modules), lambda: module_layers(ctx, modules))  # output-
    # discarding modules: their outputs re-made in backward
    again = core | discard if selective else (
        ctx.graph_cached(("3d-recomputed",), lambda: recomputed_layers(ctx, ts)) if plan.recompute else range(0))
    kind = "selective:" + "+".join(modules) if selective else ("full" if plan.recompute else "none")
    prefix_key = ("3d-prefix", dtype, t, m, tensor_nodes, sp, kind, overlap) + moe_cp
    pre_f, pre_b, pre_cf, pre_cb, pre_r = ctx.cached(prefix_key, lambda: (
        _prefix([f for f, _ in times]), _prefix([b_ for _, b_ in times]), _prefix(fwd_comm), _prefix(bwd_comm),
        _prefix([times[i][0] + fwd_comm[i] if i in again else 0.0 for i in range(ctx.n_layers)])))
    fwd_c = [rank_sum(pre_f, k) for k in range(K)]
    bwd_c = [rank_sum(pre_b, k) for k in range(K)]
    fwd_x = [rank_sum(pre_cf, k) for k in range(K)]
    bwd_x = [rank_sum(pre_cb, k) for k in range(K)]
    redo = [rank_sum(pre_r, k) for k in range(K)]
    slow = max(range(K), key=lambda k: fwd_c[k] + bwd_c[k] + fwd_x[k] + bwd_x[k] + redo[k])
    F, Bw, R = fwd_c[slow] + fwd_x[slow], bwd_c[slow] + bwd_x[slow], redo[slow]
    _, bubble = pipeline_terms(F, Bw, R, S, K, v)
    pred.compute_fwd_s, pred.compute_bwd_s = S * fwd_c[slow], S * bwd_c[slow]
    pred.comm_exposed_s["layer_collective"] = S * (fwd_x[slow] + bwd_x[slow])
    pred.recompute_s = S * R
    pred.bubble_s = bubble
    if moe_cp:  # the all-to-alls and the ring's exposed part out of the layer collectives, reported apart
        _, _, _, a2a_f, a2a_b, ring_f, ring_b = moe_cp_terms(ctx, ts, dtype, t, m, tensor_nodes, sp, *moe_cp)
        chunks = chunks_of[slow]
        a2a = S * sum(sum(a2a_f[a:z]) + sum(a2a_b[a:z]) for a, z in chunks)
        ring = S * sum(sum(ring_f[a:z]) + sum(ring_b[a:z]) for a, z in chunks)
        rest = pred.comm_exposed_s["layer_collective"] - a2a - ring
        pred.comm_exposed_s["layer_collective"] = rest if rest > 1e-9 * (a2a + ring) else 0.0  # no rounding residue
        pred.comm_exposed_s["expert_alltoall"], pred.comm_exposed_s["context_ring"] = a2a, ring
        if plan.moe_a2a_overlapped:  # the combined 1F1B's passes hide them (the bubble keeps the lone passes')
            pred.comm_exposed_s["expert_alltoall"], pred.comm_hidden_s["expert_alltoall"] = ctx.cached(
                ("3d-a2a-overlap", dtype, t, m, tensor_nodes, sp, tuple(chunks), S, K, v, slow) + moe_cp,
                lambda: a2a_overlap_s(a2a_f, a2a_b, times,
                                      moe_blocks(moe_layers(ctx)[1], (i for a, z in chunks for i in range(a, z))), S,
                                      combined_share(S, K, v, slow), ctx.cm.overlap_efficiency()))

    boundary = max((ctx.crossing_elems(a) for a, _ in bounds[1:]), default=0)
    split = t if plan.pipeline_boundary == "partitioned" else 1
    if sp:  # the boundary tensor is already split over the sequence: each tensor rank sends its 1/t, no gather
        send_s = ctx.collective("sendrecv", m * boundary * act / t / cp, 2, pipe_nodes)
    else:
        send_s = boundary_send_s(ctx, m * boundary // cp, act, split, tensor_nodes, pipe_nodes)
    pred.comm_exposed_s["pipeline_p2p"] = p2p_count(S, K, v) * send_s

    _, _, experts = moe_layers(ctx) if ep > 1 else ((), (), frozenset())

    def local_params():
        out = local_parameters(ctx.graph, ts, t)
        for i in embeds:  # the word embedding: V/t rows per rank
            out[i] /= t
        by_etp = local_parameters(ctx.graph, ts, etp) if etp != t else out  # experts split over etp ranks, not t
        for i in experts:  # expert parallelism: E/ep experts per rank
            out[i] = by_etp[i] / ep
        return out

    by_ep = (ep, etp) if ep > 1 else ()
    local = ctx.graph_cached(("3d-tensor-params", t) + by_ep, local_params)  # not tensor.py's: no V/t there
    pre_params = ctx.graph_cached(("3d-tensor-params-prefix", t) + by_ep, lambda: _prefix(local))
    pre_tensors = ctx.graph_cached(("3d-param-tensors-prefix",), lambda: _prefix(ctx.param_tensors))
    dev_params = [rank_sum(pre_params, k) for k in range(K)]
    dev_tensors = [round(rank_sum(pre_tensors, k)) for k in range(K)]
    pre_expert = ctx.graph_cached(("3d-expert-params-prefix", t) + by_ep, lambda: _prefix(
        [x if i in experts else 0.0 for i, x in enumerate(local)]))
    dev_expert = [rank_sum(pre_expert, k) for k in range(K)]  # of dev_params, the experts' (ep > 1)
    grad = groups["grad"] if groups else (d_nodes, data_network_share(plan.p_data, t, plan.devices_per_node))
    replicas = plan.p_data * cp  # the dense weights' copies: data x context ranks (Megatron-Core's dp-cp group)
    edp = expert_replicas(plan) if ep > 1 else replicas  # the experts' copies: T x CP x d / (ETP x EP)
    zero = plan.zero_stage == 1 and replicas > 1  # the distributed optimizer: each replica updates 1/replicas
    zero3 = fsdp and replicas > 1  # FSDP: weights, gradients and optimizer state sharded over the replicas

    def sharded(p: float, e: float) -> float:  # parameters one rank updates
        return (p - e) / replicas + e / edp if zero or zero3 else p

    pred.update_s = max(ctx.update_s(sharded(p, e), plan.optimizer, dtype, n, plan.mixed_precision)
                        for p, e, n in zip(dev_params, dev_expert, dev_tensors))
    divisors = tuple(ctx.params[i] / x if x else 1 for i, x in enumerate(local))
    exposed = hidden = 0.0
    op = "reduce_scatter" if zero else "allreduce"
    # each rank's gradients over their copies: the dense layers' over data x context, the experts' over their
    # d·cp/ep replicas (strategies.moe_context.group_nodes), each scheduled behind the whole backward
    syncs = [(divisors, replicas, grad)] if not experts else [
        (tuple(math.inf if i in experts else x for i, x in enumerate(divisors)), replicas, grad),
        (tuple(x if i in experts else math.inf for i, x in enumerate(divisors)), edp, groups["expert_grad"])]
    for k in range(K if not zero3 else 0):
        layers = tuple(ranks[k])
        bwd_k = [times[i][1] + bwd_comm[i] for i in layers]
        e = h = 0.0
        for divs, size, (nodes, share) in syncs:
            e_s, h_s = ctx.gradient_sync(layers, bwd_k, tuple(divs[i] for i in layers), size, nodes, plan, op=op,
                                         share=share)
            e, h = e + e_s, h + h_s
        if e >= exposed:
            exposed, hidden = e, h
    if zero3:  # every micro-batch gathers each layer's tensor-parallel shard over the replicas, twice (forward and
        # backward), and reduce-scatters its gradients (strategies.data's stage 3, at this rank's layers)
        wb, gb = compute_weight_bytes(dtype), gradient_bytes_per_param(dtype, plan.mixed_precision)
        gathers = [ctx.collective("allgather", local[i] * wb, replicas, *grad) if local[i] else 0.0
                   for i in ranks[0]]
        scatter = sum(ctx.collective("reduce_scatter", local[i] * gb, replicas, *grad) for i in ranks[0] if local[i])
        exposed, hidden = zero3_exposure(gathers, scatter, fwd_c[0] + fwd_x[0], bwd_c[0] + bwd_x[0] + redo[0], S,
                                         ctx.cm.overlap_efficiency())
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    if zero:  # the updated weights all-gathered over the replicas after the step (exposed), the largest rank's;
        # overlapped with the next step's first forward passes (Megatron-Core's --overlap-param-gather)
        gathers = [ctx.collective("allgather", (p - e) * compute_weight_bytes(dtype), replicas, grad[0], grad[1])
                   + (ctx.collective("allgather", e * compute_weight_bytes(dtype), edp, *groups["expert_grad"])
                      if e else 0.0) for p, e in zip(dev_params, dev_expert)]
        if plan.overlap_param_gather:
            gathers = [gather_stall_s(g, [[(local[i], times[i][0] + fwd_comm[i]) for i in range(a, z)]
                                          for a, z in chunks_of[k]], K) for k, g in enumerate(gathers)]
        pred.comm_exposed_s["parameter_gather"] = max(gathers)

    # the head's logits too are V/t per rank; under sequence parallelism every token-split tensor
    region = ts.split | vocab | tokens if t > 1 else frozenset()

    saved_by_rank = ctx.graph_cached(("3d-saved", dtype, t, K, v, tuple(starts), kind, sp),
                                     lambda: rank_saved_bytes(ctx, dtype, starts, K, region, core, t,
                                                              key=(dtype, t, kind, sp), discard=discard))

    full = plan.recompute and not selective
    units = ctx.graph_cached(("3d-checkpoint-units",), lambda: checkpoint_units(ctx, ts))
    checkpoints, kept, recomputed = ctx.graph_cached(
        ("3d-full-recompute", dtype, t, K, tuple(starts), sp),
        lambda: full_recompute_bytes(ctx, dtype, starts, K, units, region, t, key=(dtype, t, sp)))
    def parameters(k: int) -> tuple[float, float, float]:  # rank k's weights, gradients and optimizer state
        p, e = dev_params[k], dev_expert[k]
        if zero3:
            return tuple(x / replicas for x in parameter_bytes(p, dtype, plan.optimizer, plan.mixed_precision))
        if not zero:
            return parameter_bytes(p, dtype, plan.optimizer, plan.mixed_precision)
        dense, expert = zero1_parameter_bytes(p - e, plan, replicas), zero1_parameter_bytes(e, plan, edp)
        return tuple(a + b for a, b in zip(dense, expert))

    # with context parallelism every saved tensor holds 1/cp of its tokens; under expert parallelism the busiest
    # expert rank keeps its extra routed tokens' share of what the expert layers save (strategies.moe_context)
    extra = moe_saved_extra(ctx, plan, starts, region, t, m) if ep > 1 else [0.0] * K

    def memory(k: int) -> tuple[float, float, float, float, float]:
        flight = in_flight(plan, k)
        chunks = len(range(k, K * v, K))
        if full:  # each in-flight micro-batch's layer inputs; one layer's activations rebuilt at a time in backward
            activations = flight * m * (checkpoints[k] + kept[k]) / chunks / cp
            workspace = m * recomputed[k] / cp
        else:
            activations, workspace = flight * m * (saved_by_rank[k] + extra[k]) / chunks / cp, 0.0
        outside = flight * m * kept[k] / chunks / cp  # embeddings, final norm, head and loss: kept in every mode
        return activations + workspace + sum(parameters(k)), activations, workspace, outside, k

    _, pred.activations_bytes, pred.workspace_bytes, outside, heavy = max(memory(k) for k in range(K))
    if zero or zero3:  # no DDP bucket copy: reduce-scatter and gather buckets (strategies.data's stages 1 and 3)
        pred.weights_bytes, pred.grads_bytes, pred.optimizer_bytes = parameters(heavy)
        pred.comm_buffers_bytes += min(pred.grads_bytes, 2 * plan.bucket_bytes)
        pred.details.update(params_per_device=dev_params[heavy] / (replicas if zero3 else 1),
                            zero_stage=3 if zero3 else 1)
        if zero3:  # a gathered layer and the prefetched next one
            pred.workspace_bytes += 2 * max(local, default=0.0) * compute_weight_bytes(dtype)
    else:
        ctx.set_parameters(pred, dev_params[heavy], plan, replicas)
    if seq is not None:  # one buffer for the largest all-gathered tensor (strategies.tensor); an expert linear's
        # input gathered over its etp ranks only
        gathered = [x for x in ts.column_inputs if x in tokens] + list(seq.exits)
        folded = ctx.graph_cached(("3d-expert-gathered",), lambda: expert_column_inputs(ctx, ts)) if etp < t else ()
        pred.comm_buffers_bytes += max((m * ctx.tensor_elems(x) * act / cp * (etp / t if x in folded else 1.0)
                                        for x in gathered), default=0.0)
    if cp > 1:  # the ring's chunk of keys and values in flight beside the one in hand (send and receive buffers)
        pred.comm_buffers_bytes += max((2 * m * kv_elems(ctx, span) * act / cp / t
                                        for span in attention_spans(ctx, ts.rows, ts.columns)), default=0.0)
    if moe_cp:
        pred.details.update(context_parallel=cp, expert_parallel=ep, expert_tensor_parallel=etp,
                            nodes_context_group=groups["context"][0],
                            nodes_expert_group=groups["expert"][0], expert_params_per_device=dev_expert[heavy],
                            expert_busiest_factor=busiest(ctx, plan, m),
                            expert_dispatcher=next((ctx.layers[i].dispatcher for i in moe_layers(ctx)[0]), ""))
    pred.details.update(layer_activations_bytes=pred.activations_bytes - outside, recomputed_layer_bytes=pred.workspace_bytes)
    pred.details.update(stage_bounds=bounds, slowest_stage=slow, memory_stage=heavy, nodes_tensor_group=tensor_nodes,
                        nodes_data_group=d_nodes, nodes_pipeline_pair=pipe_nodes, micro_batch=m,
                        tensor_fwd_collective_s=S * fwd_x[slow], tensor_bwd_collective_s=S * bwd_x[slow])



# ---- lower bounds (strategies.bounds): one layout (p_data, T, K) and its variants ---------------------------
#: a variant's recomputation -> its column of `saved_totals` and of `search_totals` past the first
_RECOMPUTED = {"none": 0, "selective": 1, "full": 2}


def _layout(b: Bounds, p: int, p_data: int, t: int, K: int) -> tuple | None:
    """`_layout_terms`, once per layout."""
    key = ("3d-layout", p, p_data, t, K)
    found = b.memo.get(key)
    if found is None:
        found = b.memo[key] = _layout_terms(b, p, p_data, t, K)
    return found or None


def _layout_terms(b: Bounds, p: int, p_data: int, t: int, K: int) -> tuple | bool:
    """False when `evaluate` refuses every variant of the layout (t not a degree the model splits into, more stages
    than transformer layers), else (a plan of the layout with the search's plan fields, the tensor split, the nodes a
    tensor group spans, 1 + the least straggler excess on the terms the time bounds keep: compute, recomputation,
    update and the tensor collectives (not the bubble) (predictor.at_scale.least_excess), and without and with the
    distributed optimizer (the parameter state of total / (T·K) parameters, the update of that share)). Each of the
    T·K model-parallel ranks holds at least that share (a split layer 1/T of its parameters, the vocabulary-split
    embedding 1/T, a replicated layer all; the heaviest of the K pipeline ranks at least their mean), both memory
    models are linear in the parameters, and the slowest rank updates at least that many."""
    from predictor.at_scale import least_excess
    ctx = b.ctx
    ts = ctx.graph_cached(("tensor-split",), lambda: tensor_split(ctx.graph))
    starts = ctx.graph_cached(("3d-repeated-count",), lambda: (repeated_layers(ctx, ts),))[0]
    layers = len(starts) - 1 if starts else 0
    if layers and K > layers:
        return False
    if t > 1:
        try:
            check_degree(ctx, ts, t)
        except Infeasible:
            return False
    plan = replace(b.plan, strategy="data+tensor+pipeline", devices=p, p_data=p_data, p_tensor=t, stages=K)
    share = ctx.total_params / (t * K)
    per_zero = []
    for zero in (0, 1):
        state = zero1_parameter_bytes(share, plan) if zero else parameter_bytes(share, plan.dtype, plan.optimizer,
                                                                                  plan.mixed_precision)
        per_zero.append((sum(state), update_time_s(ctx.cm, share / (p_data if zero else 1), plan.optimizer,
                                                   plan.dtype, plan.mixed_precision)))
    return plan, ts, layout_nodes(plan)[0], 1.0 + least_excess(ctx.cm, plan, ("layer_collective",)), per_zero


def _search_totals(b: Bounds, ts: TensorSplit, t: int, m: int, nodes: int, sp: bool) -> tuple[float, float, float]:
    key = ("3d-totals", t, m, nodes, sp)
    hit = b.memo.get(key)
    if hit is None:
        hit = b.memo[key] = search_totals(b.ctx, ts, b.dtype, t, m, nodes, sp, b.plan.tp_comm_overlap)
    return hit


def layout_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, layout: tuple[int, int],
                 schedules: tuple) -> tuple[float, float] | None:
    """The least `lower_bound` over a layout's variants (the search's "3d-group"; schedules: its (micro-batches,
    virtual stage counts) pairs), None when `evaluate` refuses them all: no recomputation, the cheaper of with and
    without sequence parallelism, the most virtual stages S allows, the distributed optimizer with replicas."""
    t, K = layout
    found = _layout(b, p, p_data, t, K)
    if found is None:
        return None
    _, ts, nodes, stragglers, per_zero = found
    state, update = per_zero[1 if p_data > 1 else 0]
    if not b.timed or b.over_cap(state):
        return 0.0, state
    per_pipeline = b.batch // p_data
    best = math.inf
    for s, vs in schedules:
        core = min(_search_totals(b, ts, t, per_pipeline // s, nodes, sp)[0] for sp in ((False, True) if t > 1
                                                                                        else (False,)))
        # the bubble's (K - 1)/v share without the straggler excess (at_scale.straggler_s), the rest with it
        best = min(best, core * (s * stragglers + (K - 1) / max(vs)) / K)
    return best + update * stragglers, state


def lower_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, knob) -> tuple | None:
    """One data+tensor+pipeline candidate, knob (T, K, S, v, recomputation, sequence parallelism, ZeRO stage)
    (strategies.bounds). With C the whole graph's forward + backward + tensor collectives and R its recomputed
    forward at micro-batch m (`search_totals`), the slowest of K ranks runs at least (C + R)/K per micro-batch, so
    S·(F + Bw + R) + bubble >= (C + R)(S + (K - 1)/v)/K; plus the mean rank's update; all but the bubble times 1 +
    the least straggler excess (`_layout_terms`). Memory: the parameter state and, on the mean rank, the fewest (chunk)
    micro-batches any rank holds (the last's, pipeline.in_flight) times 1/K of the saved bytes per sample
    (`saved_totals`)."""
    t, K, s, v, recompute, sp, zero = knob
    found = _layout(b, p, p_data, t, K)
    if found is None:
        return None
    _, ts, nodes, stragglers, per_zero = found
    state, update = per_zero[zero]
    m = b.batch // p_data // s
    column = _RECOMPUTED[recompute]
    key = ("3d-saved", t, sp)
    saved = b.memo.get(key)
    if saved is None:
        saved = b.memo[key] = saved_totals(b.ctx, ts, b.dtype, t, sp)
    flight = schedule_in_flight("interleaved" if v > 1 else "1f1b", K, s, v, K - 1)
    memory = state + flight * m * saved[column] / (K * v)
    if not b.timed or b.over_cap(memory):
        return 0.0, memory, None
    totals = _search_totals(b, ts, t, m, nodes, sp)
    core = totals[0] + (totals[column] if column else 0.0)
    # the bubble without the straggler excess (at_scale.straggler_s: the fill and drain are mean draws)
    return (core * s / K + update) * stragglers + core * (K - 1) / v / K, memory, None
