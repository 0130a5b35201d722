"""Mixture of experts and context parallelism inside data+tensor+pipeline, as Megatron-Core lays them out
(docs/method.md §14b): the layers a MoE runs per expert (`expert_layers`), the busiest expert rank's share of the
routed tokens (`busiest_factor`), the dispatch and combine all-to-alls (`alltoall_seconds`), the ring that passes
keys and values around the context-parallel group under the attention blocks (`ring_exposed`), and where each group's
ranks sit (`group_nodes`); docs/decisions/2026-12-06-moe-layers-and-layout.md."""
from __future__ import annotations

import math
from functools import lru_cache

from predictor.layercost import attention_block
from predictor.layout import data_network_share, nodes_spanned
from predictor.plan import Plan
from predictor.strategies.context import Context, Infeasible


def moe_layers(ctx: Context) -> tuple[tuple[int, ...], tuple[int, ...], frozenset[int]]:
    """(dispatch layers, combine layers, expert layers): the expert layers are those a token reaches from a dispatch
    before its combine (the experts' linears and the activations between them), each run per expert."""
    def build():
        layers = ctx.layers
        dispatch = tuple(i for i, l in enumerate(layers) if l.op == "moe_dispatch")
        combine = tuple(i for i, l in enumerate(layers) if l.op == "moe_combine")
        inside: set[int] = set()
        for i, layer in enumerate(layers):
            if layer.op in ("moe_dispatch", "moe_combine"):
                continue
            srcs = [ctx.producer(name) for name in (layer.inputs or ("",))]
            if any(s in inside or (s >= 0 and layers[s].op == "moe_dispatch") for s in srcs):
                inside.add(i)
        return dispatch, combine, frozenset(inside)
    return ctx.graph_cached(("moe-layers",), build)


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0 for n = 1): the integral of x·n·φ(x)·Φ(x)^(n-1), by the
    trapezoid rule on [-10, 10] (0.5642 for n = 2, 1.4236 for 8, 2.3437 for 64)."""
    if n <= 1:
        return 0.0
    steps, lo, hi = 4000, -10.0, 10.0
    h = (hi - lo) / steps
    total = 0.0
    for j in range(steps + 1):
        x = lo + j * h
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        total += (0.5 if j in (0, steps) else 1.0) * x * n * pdf * cdf ** (n - 1)
    return total * h


def busiest_factor(rows: float, ep: int, capacity_factor: float) -> float:
    """The busiest of ep expert ranks' routed tokens over the mean `rows` (each rank's own routed tokens per
    micro-batch): with every token's top-k choices spread evenly (a router balanced by its auxiliary loss), the ranks'
    loads are a multinomial of ep·rows draws over ep cells, whose largest is rows + e_ep·sqrt(rows) to the normal
    approximation (e_ep = expected_max_normal(ep); the multinomial is ep Poisson counts less their mean); a capacity
    factor caps it at capacity_factor·rows (tokens beyond an expert's capacity are dropped; 0 = dropless);
    docs/decisions/2026-12-06-moe-load-imbalance.md."""
    if ep <= 1 or rows <= 0:
        return 1.0
    spread = 1.0 + expected_max_normal(ep) / math.sqrt(rows)
    return min(spread, capacity_factor) if capacity_factor > 0 else spread


def expert_replicas(plan: Plan) -> int:
    """The expert layers' data-parallel copies (Megatron-Core's expert-data group): T x CP x d / (ETP x EP)."""
    return plan.p_tensor * plan.p_context * plan.p_data // (plan.expert_tensor * plan.p_expert)


def group_nodes(plan: Plan) -> dict[str, tuple[int, float]]:
    """(nodes spanned, network share) of each group in Megatron-Core's rank order (tensor fastest, then context, then
    data, then pipeline, megatron/core/parallel_state.py RankGenerator "tp-cp-ep-dp-pp"; the expert layers' own grid
    "tp-ep-dp-pp" over the same ranks with the expert tensor degree ETP fastest, "parallel folding"): "context" (cp
    ranks, stride t), "grad" (the dense gradients' d·cp ranks, stride t), "expert" (ep ranks, stride ETP),
    "expert_grad" (the experts' T·cp·d/(ETP·ep) replicas, stride ETP·ep). With ETP = t (the default) the expert
    ranks are every t-th rank of the context x data ranks."""
    t, cp, d, ep, dpn = plan.p_tensor, plan.p_context, plan.p_data, plan.p_expert, plan.devices_per_node
    etp = plan.expert_tensor

    def at(size: int, stride: int) -> tuple[int, float]:
        nodes = nodes_spanned(size, stride, dpn, min(stride, dpn)) if size > 1 else 1
        return nodes, data_network_share(size, stride, dpn)

    return {"context": at(cp, t), "grad": at(d * cp, t), "expert": (nodes_spanned(ep, etp, dpn, min(etp, dpn)), 1.0),
            "expert_grad": at(expert_replicas(plan), etp * ep)}


def check(ctx: Context, plan: Plan, t: int, sp: bool) -> None:
    """Infeasible unless the plan's context and expert degrees fit the model (Megatron-Core's own checks)."""
    cp, ep = plan.p_context, plan.p_expert
    dispatch, _, _ = moe_layers(ctx)
    if plan.expert_tensor != t and ep <= 1:
        raise Infeasible(f"--expert-tensor-parallel {plan.expert_tensor} (unlike the tensor degree {t}) folds the "
                         "expert ranks over the tensor ranks: it needs --expert-parallel above 1")
    if ep > 1:
        if not dispatch:
            raise Infeasible(f"--expert-parallel {ep} needs a mixture-of-experts model (--model-arg experts=E)")
        experts = ctx.layers[dispatch[0]].groups
        if experts % ep:
            raise Infeasible(f"--expert-parallel {ep} does not divide the {experts} experts")
        etp = plan.expert_tensor
        if t % etp:
            raise Infeasible(f"--expert-tensor-parallel {etp} does not divide the tensor degree {t}")
        if (t * plan.p_data * cp) % (etp * ep):
            raise Infeasible(f"--expert-parallel {ep} x expert tensor degree {etp} does not divide the tensor x "
                             f"data x context ranks {t * plan.p_data * cp}" if etp < t else
                             f"--expert-parallel {ep} does not divide the data x context ranks {plan.p_data * cp}")
        if t > 1 and not sp:
            raise Infeasible(f"--expert-parallel {ep} with tensor parallelism {t} needs --sequence-parallel "
                             "(Megatron-Core asserts it)")
    if cp > 1:
        seq = ctx.graph.input_shape[0] if len(ctx.graph.input_shape) == 1 else 0
        if not seq or not any(attention_block(l) for l in ctx.layers):
            raise Infeasible(f"--context-parallel {cp} splits a transformer's sequence; this model has no "
                             "token sequence with attention")
        if seq % (2 * cp * (t if sp else 1)):
            raise Infeasible(f"--context-parallel {cp}: the sequence {seq} must divide into 2 x {cp} chunks "
                             + (f"of a multiple of {t} tokens (sequence parallelism)" if sp else "(causal balance)"))


def attention_spans(ctx: Context, rows: tuple[int, ...], columns: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Per attention, its block layers (`attention_block`: fused attention, or the score products, softmax and
    dropout) between a column-parallel linear and the next row-parallel one; each one span."""
    def build():
        out = []
        ordered = sorted(rows)
        for c in columns:
            r = next((x for x in ordered if x > c), None)
            span = tuple(i for i in range(c + 1, r if r is not None else c + 1) if attention_block(ctx.layers[i]))
            if span:
                out.append(span)
        return out
    return ctx.graph_cached(("cp-spans", rows, columns), build)


def kv_elems(ctx: Context, span: tuple[int, ...]) -> int:
    """Elements per sample of one attention's keys and values: the fused attention's second and third operands
    (fewer heads than the queries under grouped-query attention), or the score product's and the context
    product's second; twice the queries when an operand is the model input."""
    layers, index = ctx.layers, ctx.index
    names = [n for i in span if layers[i].op in ("sdpa", "bmm") for n in layers[i].inputs[1:3 if layers[i].op == "sdpa"
                                                                                           else 2]]
    if len(names) < 2 or any(n not in index for n in names):
        return 2 * layers[span[0]].input_elems
    return sum(layers[index[n]].output_elems for n in names[:2])


def ring_exposed(ctx: Context, cp: int, block_fwd: float, block_bwd: float, kv_bytes: float, nodes: int
                 ) -> tuple[float, float]:
    """(forward, backward) seconds of one attention's ring that the blocks do not hide, per micro-batch: cp - 1
    steps, each sending one chunk's keys and values (kv_bytes) to the next rank while the attention of the chunk
    in hand runs (block_fwd: one block's time), the excess exposed; backward sends keys, values and their
    gradients (2·kv_bytes) beside each block's backward (Transformer Engine's AttnFuncWithCPAndKVP2P);
    docs/decisions/2026-12-06-context-parallel-ring.md."""
    if cp <= 1:
        return 0.0, 0.0
    pair = 2 if nodes > 1 else 1  # a ring that leaves the node is paced by its inter-node hop
    send_f = ctx.collective("sendrecv", kv_bytes, 2, pair)
    send_b = ctx.collective("sendrecv", 2 * kv_bytes, 2, pair)
    return (cp - 1) * max(0.0, send_f - block_fwd), (cp - 1) * max(0.0, send_b - block_bwd)


def alltoall_seconds(ctx: Context, ep: int, size_bytes: float, nodes: int) -> float:
    """One dispatch or combine all-to-all over the ep expert ranks: each rank's send buffer size_bytes (the busiest
    rank's routed tokens x hidden x bytes), of which (ep - 1)/ep leaves the rank (calibrate's alltoall bus factor)."""
    return ctx.collective("alltoall", size_bytes, ep, nodes) if ep > 1 else 0.0


def expected_remote_nodes(experts: int, top_k: int, nodes: int) -> float:
    """Distinct other nodes one token's top_k experts sit on, expected, with the experts spread evenly over `nodes`
    nodes and the k distinct experts a uniform draw (a balanced router): (N - 1)(1 - C(E - E/N, k) / C(E, k))."""
    if nodes <= 1:
        return 0.0
    per_node = experts // nodes
    return (nodes - 1) * (1.0 - math.comb(experts - per_node, top_k) / math.comb(experts, top_k))


def dispatch_seconds(ctx: Context, layer, ep: int, size_bytes: float, nodes: int) -> float:
    """One dispatch or combine of a moe_dispatch `layer` over ep ranks on `nodes` nodes, by its dispatcher: the
    all-to-all, or DeepEP's deduplicated exchange (its top-k: the layer's routed rows over its tokens)."""
    if layer.dispatcher == "deepep":
        top_k = layer.output_shape[-2] // max(1, layer.input_shape[-2])
        return deepep_seconds(ctx, ep, size_bytes, nodes, layer.groups, top_k)
    return alltoall_seconds(ctx, ep, size_bytes, nodes)


def deepep_seconds(ctx: Context, ep: int, size_bytes: float, nodes: int, experts: int, top_k: int) -> float:
    """One dispatch or combine of a deduplicating dispatcher (DeepEP, Megatron-Core's HybridEP; DeepSeek-V3's
    scheme, arXiv 2412.19437 §3.2.2: a token goes over InfiniBand once to each node holding one of its experts, then
    over NVLink to the experts' GPUs): each rank sends its tokens' bytes (size_bytes / top_k) x the expected remote
    nodes through its NIC, while the k copies fan out inside the nodes; the slower of the two. Inside one node it
    is the all-to-all (docs/method.md §14b)."""
    if ep <= 1:
        return 0.0
    if nodes <= 1:
        return alltoall_seconds(ctx, ep, size_bytes, 1)
    local = ep // nodes
    inter = ctx.collective("sendrecv", size_bytes / top_k * expected_remote_nodes(experts, top_k, nodes), 2, 2)
    return max(inter, alltoall_seconds(ctx, local, size_bytes, 1))
