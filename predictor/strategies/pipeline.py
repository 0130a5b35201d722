"""Layer (pipeline) parallelism with the GPipe schedule, and data x pipeline (ParaDL tech report Table III; GPipe,
Huang et al. §2.3; docs/method.md §13).

The layers are cut into K contiguous stages balanced on their compute time at the micro-batch m = b/S; each phase
is a flow shop of S micro-batches over K stages, so compute = S·(F + Bw) and bubble = sum_k (f_k + b_k) - (F + Bw),
which is ParaDL's (K - 1)·(F + Bw) for balanced stages and the serial compute at S = 1 when a cut cannot balance.
Each stage keeps its saved tensors for all S micro-batches (or, with recompute, its boundary inputs and one
micro-batch); a stage's gradients are all-reduced over its replicas after its last backward. Other schedules
(plan.schedule; Narayanan et al. SC'21 §2.2): 1f1b (GPipe's time, at most min(S, K - k) micro-batches in flight on
stage k) and interleaved (v chunks per device: the bubble / v, v times the boundary crossings).
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from predictor.layercost import Split
from predictor.layout import data_network_share, data_nodes
from predictor.memory import gradient_bytes_per_param, parameter_bytes
from predictor.overlap import bucket_layout, overlap, ready_times
from predictor.plan import PIPELINE_SCHEDULES, Plan, Prediction
from predictor.strategies.bounds import Bounds, refinement
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch


def partition(costs: list[float], stages: int) -> list[int]:
    """Stage start indices for a contiguous split of `costs` into `stages` non-empty parts minimising
    the largest part: binary search on the bound; for a bound, each stage greedily takes as many layers
    as fit (bisect on prefix sums) while leaving one layer for every later stage."""
    n = len(costs)
    prefix = [0.0] + list(accumulate(costs))

    def cuts(bound: float) -> list[int] | None:
        starts = []
        begin = 0
        for k in range(stages):
            starts.append(begin)
            later = stages - k - 1
            if later == 0:
                return starts if prefix[n] - prefix[begin] <= bound else None
            end = min(bisect_right(prefix, prefix[begin] + bound) - 1, n - later)
            if end <= begin:
                return None
            begin = end
        return None

    # no cut beats the largest layer or the mean stage; filling stages greedily to lo + the largest layer
    # usually fits (the one-layer-per-later-stage rule can defeat it: then search up to the total)
    largest = max(costs, default=0.0)
    lo = max(largest, prefix[-1] / max(stages, 1))
    hi = min(prefix[-1], lo + largest)
    best = cuts(hi)
    if best is None:
        hi = prefix[-1]
        best = cuts(hi) or _even(n, stages)
    for _ in range(30):
        if hi - lo <= 1e-3 * hi:  # balanced to 0.1% of the slowest stage
            break
        mid = (lo + hi) / 2
        found = cuts(mid)
        if found is None:
            lo = mid
        else:
            hi, best = mid, found
    return best


def _even(n: int, stages: int) -> list[int]:
    return [round(k * n / stages) for k in range(stages)]


@dataclass(frozen=True)
class Stages:
    """Everything about a K-stage cut at micro-batch m that does not depend on the rest of the plan."""

    bounds: list[tuple[int, int]]
    fwd_s: list[float]  # per stage, one micro-batch
    bwd_s: list[list[float]]  # per stage, per layer, one micro-batch
    bwd_total_s: list[float]
    params: list[float]
    incoming_elems: list[int]  # per sample, tensors received from earlier stages
    outgoing_elems: list[int]  # per sample, tensors sent to later stages
    saved_bytes: list[float]  # per sample, tensors the stage keeps for backward
    workspace_bytes: list[float]  # per sample: the stage's largest dL/dy + dL/dx


def stage_cut(ctx: Context, dtype: str, K: int, m: int) -> tuple[list[tuple[float, float]], list[int]]:
    """(every layer's (forward, backward) at micro-batch m, the first layer of each of K stages): the cut balanced on
    their sums (`partition`)."""
    def build():
        coster = ctx.coster(dtype)
        split = Split(m)
        per_layer = [coster.times(i, split) for i in range(ctx.n_layers)]
        return per_layer, partition([f + bw for f, bw in per_layer], K)
    return ctx.cached(("pipe-cut", dtype, K, m), build)


def boundary_send_s(ctx: Context, m: int, start: int, act: int, nodes: int) -> float:
    """One micro-batch's tensors crossing into a stage starting at layer `start`, sent between two ranks."""
    return ctx.collective("sendrecv", m * (ctx.crossing_elems(start) if start > 0 else 0) * act, 2, nodes)


def slowest_p2p(ctx: Context, starts: list[int], K: int, v: int, m: int, act: int, dpn: int) -> float:
    """The slowest boundary send of one micro-batch between the K·v chunks starting at `starts` (chunk j on device
    j mod K; a pair on two nodes when the devices are)."""
    worst = 0.0
    for j in range(1, K * v):
        a, z = (j - 1) % K, j % K  # devices on either side of chunk boundary j
        worst = max(worst, boundary_send_s(ctx, m, starts[j], act, 1 if a // dpn == z // dpn else 2))
    return worst


def device_buckets(ctx: Context, dtype: str, K: int, v: int, m: int, bounds, bwd_s, bucket_bytes: float,
                   grad_bytes: float) -> list[tuple[list, list[float]]]:
    """Per device, (its DDP buckets, its backward clock): its chunks' layers in graph order, their backward times
    (`bwd_s`, per chunk per layer) end to end. They do not depend on p_data: searches reuse them."""
    def build():
        out = []
        for k in range(K):
            chunks = range(k, K * v, K)
            layers = [i for j in chunks for i in range(*bounds[j])]
            out.append((bucket_layout([ctx.params[i] * grad_bytes for i in layers], bucket_bytes),
                        ready_times([t for j in chunks for t in bwd_s[j]])))
        return out
    return ctx.cached(("pipe-buckets", dtype, K, v, m, bucket_bytes, grad_bytes), build)


def _stages(ctx: Context, dtype: str, K: int, m: int) -> Stages:
    per_layer, starts = stage_cut(ctx, dtype, K, m)
    bounds = list(zip(starts, starts[1:] + [ctx.n_layers]))
    act = ctx.act_size(dtype)
    crossing = [ctx.crossing_elems(a) if a > 0 else 0 for a, _ in bounds]
    saved = [ctx.saved_bytes_per_sample(dtype, ("stage", a, z),
                                        lambda t, a=a, z=z: 1.0 if any(a <= s < z for s in t.savers) else 0.0)
             for a, z in bounds]
    return Stages(
        bounds=bounds,
        fwd_s=[sum(per_layer[i][0] for i in range(a, z)) for a, z in bounds],
        bwd_s=[[per_layer[i][1] for i in range(a, z)] for a, z in bounds],
        bwd_total_s=[sum(per_layer[i][1] for i in range(a, z)) for a, z in bounds],
        params=[sum(ctx.params[i] for i in range(a, z)) for a, z in bounds],
        incoming_elems=crossing,
        outgoing_elems=crossing[1:] + [0],
        saved_bytes=saved,
        workspace_bytes=[2 * max(ctx.layers[i].output_elems for i in range(a, z)) * act for a, z in bounds])


@dataclass(frozen=True)
class Devices:
    """Per device, the chunks it holds (chunk j on device j mod K: one chunk each unless interleaved) and their
    totals: forward and backward seconds per micro-batch, parameters and parameter tensors."""

    chunks: list[list[int]]
    fwd_s: list[float]
    bwd_s: list[float]
    params: list[float]
    tensors: list[int]


def _devices(ctx: Context, st: Stages, K: int, v: int) -> Devices:
    chunks = [list(range(k, K * v, K)) for k in range(K)]
    return Devices(chunks=chunks,
                   fwd_s=[sum(st.fwd_s[j] for j in c) for c in chunks],
                   bwd_s=[sum(st.bwd_total_s[j] for j in c) for c in chunks],
                   params=[sum(st.params[j] for j in c) for c in chunks],
                   tensors=[sum(sum(ctx.param_tensors[a:z]) for a, z in (st.bounds[j] for j in c)) for c in chunks])


def in_flight(plan: Plan, k: int) -> int:
    """Micro-batches (interleaved: chunk micro-batches) device k holds saved tensors for (module docstring); one
    more under interleaving with Megatron-Core's combined 1F1B (Plan.moe_a2a_overlapped: its warm-up runs one more
    forward, docs/method.md §14c)."""
    held = schedule_in_flight(plan.schedule, plan.stages, plan.micro_batches, plan.virtual_stages, k)
    if plan.schedule == "interleaved" and plan.moe_a2a_overlapped:
        held = min(plan.micro_batches * plan.virtual_stages, held + 1)
    return held


def schedule_in_flight(schedule: str, K: int, S: int, v: int, k: int) -> int:
    """`in_flight` of a plan with that schedule, K stages, S micro-batches and v virtual stages."""
    if schedule == "1f1b":
        return min(S, K - k)
    if schedule == "interleaved":
        return min(S * v, 2 * (K - k - 1) + (v - 1) * K + 1)
    return S


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    K, S = plan.stages, plan.micro_batches
    v = plan.virtual_stages if plan.schedule == "interleaved" else 1
    if plan.schedule not in PIPELINE_SCHEDULES:
        raise Infeasible(f"unknown pipeline schedule {plan.schedule!r} (known: {', '.join(PIPELINE_SCHEDULES)})")
    if plan.schedule == "interleaved" and (v < 2 or S % K):
        raise Infeasible(f"interleaved 1F1B needs >= 2 virtual stages and micro-batches ({S}) a multiple of the "
                         f"{K} stages")
    b = local_batch(plan)
    if K * v > ctx.n_layers:
        raise Infeasible(f"{K * v} stages > {ctx.n_layers} layers")
    if S < 1 or b % S:
        raise Infeasible(f"{b} samples per pipeline not divisible into {S} micro-batches")
    m = b // S
    dtype = plan.dtype
    act = ctx.act_size(dtype)
    st: Stages = ctx.cached(("stages", dtype, K * v, m), lambda: _stages(ctx, dtype, K * v, m))
    dev: Devices = ctx.cached(("pipe-devices", dtype, K, v, m), lambda: _devices(ctx, st, K, v))
    devices, dev_params, dev_tensors = dev.chunks, dev.params, dev.tensors
    F = max(dev.fwd_s)
    Bw = max(dev.bwd_s)
    pred.compute_fwd_s, pred.compute_bwd_s = S * F, S * Bw
    if v == 1:  # flow-shop fill and drain (module docstring); ParaDL's (K - 1)·(F + Bw) when balanced
        pred.bubble_s = sum(dev.fwd_s) + sum(dev.bwd_s) - F - Bw
    else:
        pred.bubble_s = (K - 1) * (F + Bw) / v
    if plan.recompute:
        pred.recompute_s = S * F + sum(dev.fwd_s) - F if v == 1 else (S + K - 1) * F

    dpn = plan.devices_per_node

    p2p = ctx.cached(("p2p", dtype, K, v, m, dpn), lambda: slowest_p2p(ctx, [a for a, _ in st.bounds], K, v, m, act,
                                                                         dpn))
    pred.comm_exposed_s["pipeline_p2p"] = 2 * (v * S + K - 2) * p2p if K > 1 else 0.0
    pred.update_s = ctx.cached(("pipe-update", dtype, K, v, m, plan.optimizer),
                               lambda: max(ctx.update_s(p, plan.optimizer, dtype, t)
                                           for p, t in zip(dev_params, dev_tensors)))

    d_nodes = data_nodes(plan.p_data, K, dpn)
    share = data_network_share(plan.p_data, K, dpn)
    grad_bytes = gradient_bytes_per_param(dtype, plan.mixed_precision)

    def gradient() -> tuple[float, float]:
        """The device whose bucketed gradient allreduce (over its p_data replicas) is most exposed."""
        if plan.p_data <= 1:
            return 0.0, 0.0

        stages = device_buckets(ctx, dtype, K, v, m, st.bounds, st.bwd_s, plan.bucket_bytes, grad_bytes)

        def allreduce_s(size: float) -> float:
            return ctx.collective("allreduce", size, plan.p_data, d_nodes, share)

        exposed = hidden = 0.0
        for layout, ready in stages:
            e, h = overlap(layout, ready, allreduce_s)
            if e >= exposed:
                exposed, hidden = e, h
        return exposed, hidden

    exposed, hidden = ctx.cached(("pipe-grad", dtype, K, v, m, plan.p_data, d_nodes, share, plan.bucket_bytes,
                                  grad_bytes), gradient)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden

    def heaviest_device() -> tuple:
        """The device holding the most bytes (it sets the memory per device), with its terms."""
        worst = None
        for k, chunks in enumerate(devices):
            flight = in_flight(plan, k)  # micro-batches (interleaved: chunk micro-batches) held at once
            saved = sum(st.saved_bytes[j] for j in chunks) / len(chunks)  # one chunk's, on average
            incoming = sum(st.incoming_elems[j] for j in chunks) / len(chunks)
            if plan.recompute:  # the stage inputs of every micro-batch in flight, one micro-batch's activations
                activations = flight * m * incoming * act + m * saved
            else:
                activations = flight * m * saved
            buffers = sum(2 * m * (st.incoming_elems[j] + st.outgoing_elems[j]) * act for j in chunks)
            workspace = m * max(st.workspace_bytes[j] for j in chunks)
            total = activations + buffers + workspace + sum(parameter_bytes(dev_params[k], dtype, plan.optimizer,
                                                                            plan.mixed_precision))
            if worst is None or total > worst[0]:
                worst = (total, k, activations, buffers, workspace)
        return worst

    # independent of the data-parallel degree: a search over device counts reuses it
    _, k, pred.activations_bytes, buffers, pred.workspace_bytes = ctx.cached(
        ("pipe-memory", dtype, K, v, plan.schedule, m, S, plan.recompute, plan.optimizer), heaviest_device)
    ctx.set_parameters(pred, dev_params[k], plan, plan.p_data)
    pred.comm_buffers_bytes += buffers
    pred.details.update(stage_bounds=st.bounds, stage_fwd_s=st.fwd_s, stage_bwd_s=st.bwd_total_s,
                        stage_params=st.params, memory_stage=k, nodes_data_group=d_nodes)


# ---- lower bounds (strategies.bounds) of the search's pipeline plans: GPipe, no recomputation ----------------
def _layer_keeps(ctx: Context, dtype: str) -> tuple[list[float], list[float], float]:
    """Per layer, bytes per sample of the saved tensors it keeps (a stage holding it keeps them all) and of those
    it is the first saver of; their total."""
    def build():
        keeps, first = [0.0] * ctx.n_layers, [0.0] * ctx.n_layers
        total = 0.0
        for t in ctx.saved:
            size = t.size_bytes(dtype)
            for s in set(t.savers):
                keeps[s] += size
            first[min(t.savers)] += size
            total += size
        return keeps, first, total
    return ctx.graph_cached(("pipe-layer-keeps", dtype), build)


def _stages_needed(b: Bounds, samples: int) -> float:
    """The fewest contiguous stages whose every one holds, within the cap, its layers' parameter state and their
    saved tensors for `samples` samples (each tensor at its first saver): no cut into fewer stages fits, whatever it
    is (greedy packing is optimal for a bottleneck threshold). inf when one layer alone exceeds the cap."""
    ctx, cap = b.ctx, b.cap
    _, first, _ = _layer_keeps(ctx, b.dtype)
    stages, acc = 1, 0.0
    for keep, params in zip(first, ctx.params):
        w = samples * keep + b.parameter_state(params)
        if w > cap:
            return math.inf
        acc += w
        if acc > cap:
            stages, acc = stages + 1, w
    return stages


def _memory_floors(b: Bounds, samples: int, m: int) -> tuple[float, float, float]:
    """(the most a stage holding any one layer needs: its saved tensors for the pipeline's `samples`, its gradient
    buffers at micro-batch m; what all stages hold together: every saved tensor and the parameter state; the fewest
    stages that fit: `_stages_needed`)."""
    ctx = b.ctx
    keeps, _, saved_total = _layer_keeps(ctx, b.dtype)
    largest = max((samples * keep + 2 * m * b.act * layer.output_elems for keep, layer in zip(keeps, ctx.layers)),
                  default=0.0)
    needed = b.memo.get(("pipe-stages-needed", samples))
    if needed is None:
        needed = b.memo[("pipe-stages-needed", samples)] = _stages_needed(b, samples)
    return largest, samples * saved_total + b.model_state, needed


def lower_bound(b: Bounds, strategy: str, p: int, p_data: int, K: int, S: int) -> tuple:
    """GPipe over K stages with S micro-batches (strategies.bounds). Memory (`_memory_floors`): the most a stage
    holding any one layer needs, the mean stage's share of what all hold, inf below the stages a greedy packing
    needs. Time: (S - 1)·(F + B) + every layer's F + B with F >= max(sum F / K, the slowest layer) (B alike), and
    2·(S + K - 2) of the cheapest boundary send; refined by `refine_window`, then `refine_cut`."""
    per_pipeline = b.batch // p_data
    m = per_pipeline // S
    memo = b.memo
    floors = memo.get(("pipe-floors", per_pipeline, m))
    if floors is None:
        floors = memo[("pipe-floors", per_pipeline, m)] = _memory_floors(b, per_pipeline, m)
    largest, together, needed = floors
    memory = max(largest, together / K) if K >= needed else math.inf
    if not b.timed or b.over_cap(memory):
        return 0.0, memory, None
    fsum, bsum, fmax, bmax = b.layer_sums(m)
    time_s = (S - 1) * (max(fsum / K, fmax) + max(bsum / K, bmax)) + fsum + bsum
    if K > 1:
        time_s += 2 * (S + K - 2) * _cheapest_send(b, m, 2 if K - 1 >= b.dpn else 1)
    return time_s, memory, ("pipeline-window", m, K, S, p_data, time_s)


def _sends(b: Bounds, m: int, nodes: int) -> list[float]:
    """Per layer a >= 1, `boundary_send_s` into a stage starting there."""
    hit = b.memo.get(("pipe-sends", m, nodes))
    if hit is None:
        hit = b.memo[("pipe-sends", m, nodes)] = [0.0] + [boundary_send_s(b.ctx, m, a, b.act, nodes)
                                                           for a in range(1, b.ctx.n_layers)]
    return hit


def _cheapest_send(b: Bounds, m: int, nodes: int) -> float:
    hit = b.memo.get(("pipe-cheapest-send", m, nodes))
    if hit is None:
        hit = b.memo[("pipe-cheapest-send", m, nodes)] = min(_sends(b, m, nodes)[1:], default=0.0)
    return hit


@refinement("pipeline-window")
def refine_window(b: Bounds, found: tuple) -> tuple[float, float, tuple | None]:
    """Stage k starts at a layer in [k, n - K + k], so its boundary send costs at least the cheapest there."""
    _, m, K, S, p_data, bound = found
    if K <= 1:
        return 0.0, 0.0, None

    def worst():
        n, dpn, out = b.ctx.n_layers, b.dpn, 0.0
        for stage in range(1, K):
            costs = _sends(b, m, 1 if (stage - 1) // dpn == stage // dpn else 2)
            out = max(out, min(costs[stage:n - K + stage + 1]))
        return out

    extra = 2 * (S + K - 2) * (b.cached(("pipe-window", m, K), worst) - _cheapest_send(b, m, 2 if K - 1 >= b.dpn
                                                                                        else 1))
    return extra, 0.0, ("pipeline-cut", m, K, S, p_data, bound + extra)


@refinement("pipeline-cut")
def refine_cut(b: Bounds, found: tuple) -> tuple[float, float, None]:
    """The stage cut itself (`stage_cut`, as `evaluate` makes it): the slowest stage's compute and boundary send as
    evaluated, and per stage a gradient exposure of at least its buckets' all-reduces (the buckets `evaluate` makes,
    run one after another) minus its last micro-batch's backward."""
    _, m, K, S, p_data, bound = found
    ctx, dtype = b.ctx, b.dtype

    def sums():
        per_layer, starts = stage_cut(ctx, dtype, K, m)
        cut = list(zip(starts, starts[1:] + [ctx.n_layers]))
        p2p = ctx.cached(("p2p", dtype, K, 1, m, b.dpn), lambda: slowest_p2p(ctx, starts, K, 1, m, b.act, b.dpn))
        return (max(sum(per_layer[i][0] for i in range(a, z)) for a, z in cut),
                max(sum(per_layer[i][1] for i in range(a, z)) for a, z in cut), sum(f + bw for f, bw in per_layer), p2p)

    fwd, bwd, total, p2p = b.cached(("pipe-cut-sums", K, m), sums)
    time_s = (S - 1) * (fwd + bwd) + total + 2 * (S + K - 2) * p2p
    if p_data > 1:
        nodes, share = data_nodes(p_data, K, b.dpn), data_network_share(p_data, K, b.dpn)
        time_s += max(max(0.0, sum(ctx.collective("allreduce", size, p_data, nodes, share) for size in sizes) - last)
                      for sizes, last in b.cached(("pipe-cut-buckets", K, m), lambda: _stage_buckets(b, K, m)))
    return max(0.0, time_s - bound), 0.0, None


def _stage_buckets(b: Bounds, K: int, m: int) -> list[tuple[tuple[float, ...], float]]:
    """Per stage of the cut, (its DDP bucket sizes, its backward per micro-batch): `device_buckets`' for one chunk a
    device, kept as numbers."""
    ctx, plan = b.ctx, b.plan
    per_layer, starts = stage_cut(ctx, b.dtype, K, m)
    grad_bytes = gradient_bytes_per_param(b.dtype, plan.mixed_precision)
    out = []
    for a, z in zip(starts, starts[1:] + [ctx.n_layers]):
        ready = ready_times([per_layer[i][1] for i in range(a, z)])
        out.append((tuple(size for _, size in bucket_layout([ctx.params[i] * grad_bytes for i in range(a, z)],
                                                            plan.bucket_bytes)), ready[-1] if ready else 0.0))
    return out
