"""Spatial parallelism and its data hybrids (ParaDL tech report Table III, eq. 10; docs/method.md §10, §14).

A group of p_spatial devices splits every sample's H/W(/D) as `spatial_split`; the spatial region is the prefix of
layers at least as large as the split. Inside it each conv/pool exchanges halos with its neighbours (forward on x,
backward on dL/dy), costed as the profile's `halo` collective, and batch norm is synchronised over the group (ParaDL
omits it; on a latency-bound network it costs more than the halos). After the region, `spatial` / `data+spatial`
all-gather the crossing tensors and run the rest replicated; `spatial-then-data` redistributes them with an
all-to-all and runs the rest data parallel. Weights are replicated, gradients all-reduced over all devices.
Departures from ParaDL: H, W and D splits, C and the full perpendicular extent counted, the whole per-device batch,
the backward exchange on dL/dy.
"""
from __future__ import annotations

import math

from predictor.layercost import Split, local_dims
from predictor.layout import inner_nodes, nodes_spanned
from predictor.plan import Plan, Prediction
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import local_batch


def splittable(ctx: Context, index: int, split: tuple[int, ...]) -> bool:
    layer = ctx.layers[index]
    if len(layer.input_shape) != len(split) + 1 or len(layer.output_shape) != len(split) + 1:
        return False
    return all(x >= s for x, s in zip(layer.input_shape[1:], split)) and \
        all(y >= s for y, s in zip(layer.output_shape[1:], split))


def region_end(ctx: Context, split: tuple[int, ...], limit: int | None) -> int:
    """Number of leading layers that stay spatially split (capped by `limit`)."""
    return ctx.cached(("region", split, limit), lambda: _region_end(ctx, split, limit))


def _region_end(ctx: Context, split: tuple[int, ...], limit: int | None) -> int:
    end = 0
    cap = ctx.n_layers if limit is None else min(limit, ctx.n_layers)
    while end < cap and splittable(ctx, end, split):
        end += 1
    return end


def halo_bytes(ctx: Context, index: int, n: int, split: tuple[int, ...], act: int) -> list[tuple[int, float, float]]:
    """Per split dim of layer `index`: (factor, fwd bytes per neighbour side, bwd bytes per side)."""
    layer = ctx.layers[index]
    if not layer.kernel:
        return []
    widths = layer.halo_width
    in_local = local_dims(layer.input_shape[1:], split)
    out_local = local_dims(layer.output_shape[1:], split)
    first = all(i == "" for i in (layer.inputs or ("",)))
    out = []
    for d, s in enumerate(split):
        h = widths[d] if d < len(widths) else 0
        if s <= 1 or h <= 0:
            continue
        fwd = n * layer.input_shape[0] * h * math.prod(x for e, x in enumerate(in_local) if e != d) * act
        h_out = -(-h // max(layer.stride[d], 1))
        bwd = 0.0 if first else n * layer.output_shape[0] * h_out * math.prod(
            y for e, y in enumerate(out_local) if e != d) * act
        out.append((s, fwd, bwd))
    return out


def _halo_totals(ctx: Context, n: int, split: tuple[int, ...], end: int, inner_n: int, act: int):
    """(forward halo s, backward halo s, largest halo buffer bytes) over the spatial region."""
    per_sample = ctx.cached(("halo-bytes", split, act),  # halo bytes are linear in the batch
                            lambda: [halo_bytes(ctx, i, 1, split, act) for i in range(region_end(ctx, split, None))])
    halo_fwd = halo_bwd = halo_buffer = 0.0
    for i in range(end):
        for s, fb, bb in per_sample[i]:
            halo_fwd += ctx.collective("halo", 2 * n * fb, s, min(s, inner_n))
            halo_bwd += ctx.collective("halo", 2 * n * bb, s, min(s, inner_n))
            halo_buffer = max(halo_buffer, 4 * n * fb)  # send + receive, both sides
    return halo_fwd, halo_bwd, halo_buffer


def _validate(ctx: Context, plan: Plan) -> tuple[int, ...]:
    split = plan.spatial_split
    if len(split) != ctx.spatial_ndim or math.prod(split) != plan.p_spatial:
        raise Infeasible(f"spatial split {'x'.join(map(str, split)) or '-'} does not match p_spatial "
                         f"{plan.p_spatial} over {ctx.spatial_ndim} spatial dims")
    return split


def evaluate(ctx: Context, plan: Plan, pred: Prediction) -> None:
    split = _validate(ctx, plan)
    n = local_batch(plan)
    mix = plan.strategy == "spatial-then-data"
    end = region_end(ctx, split, plan.spatial_layers if mix else None)
    if end == 0:
        first = ctx.layers[0]
        raise Infeasible(f"layer {first.name} ({'x'.join(map(str, first.output_shape[1:])) or 'no spatial dims'}) "
                         f"cannot be split {'x'.join(map(str, split))}")
    if mix and n % plan.p_spatial:
        raise Infeasible(f"{n} samples per spatial group not divisible by p_spatial {plan.p_spatial}")
    act = ctx.act_size(plan.dtype)
    dpn = plan.devices_per_node
    inner_n = inner_nodes(plan.p_spatial, plan.p_data, dpn)
    tail_n = n // plan.p_spatial if mix else n

    local = Split(n, split)
    tail = Split(tail_n)
    key = ("spatial", n, split, end, tail_n)

    def combined():  # region at the split shape + the unsplit tail (shared by every split ending at `end`)
        rf, rb, rl = ctx.compute(plan.dtype, ("region", n, split, end), range(end), lambda i: local)
        tf, tb, tl = ctx.compute(plan.dtype, ("tail", tail_n, end), range(end, ctx.n_layers), lambda i: tail)
        return rf + tf, rb + tb, rl + tl

    fwd, bwd, bwd_list = ctx.cached((plan.dtype, key), combined)
    pred.compute_fwd_s, pred.compute_bwd_s = fwd, bwd

    halo_key = ("halo", plan.dtype, n, split, end, inner_n)
    halo = ctx.cached(halo_key, lambda: _halo_totals(ctx, n, split, end, inner_n, act))
    halo_fwd, halo_bwd, halo_buffer = halo
    pred.comm_exposed_s["halo"] = halo_fwd + halo_bwd
    pred.details["halo_fwd_s"], pred.details["halo_bwd_s"] = halo_fwd, halo_bwd

    def batch_norm_sync_s() -> float:
        stats = [(2 * ctx.layers[i].channels_in + 1) * act for i in range(end) if ctx.layers[i].op == "batchnorm"]
        return sum(2 * ctx.collective("allreduce", size, plan.p_spatial, inner_n) for size in stats)

    bn_sync_s = ctx.cached(("spatial-bn-sync", plan.dtype, end, plan.p_spatial, inner_n), batch_norm_sync_s)
    crossing = ctx.crossing(end) if end < ctx.n_layers else []
    switch_s = 0.0
    for p in crossing:
        full = n * ctx.tensor_elems(p) * act
        if mix:
            switch_s += 2 * ctx.collective("alltoall", full / plan.p_spatial, plan.p_spatial, inner_n)
        else:
            switch_s += ctx.collective("allgather", full, plan.p_spatial, inner_n)
    if mix:
        pred.comm_exposed_s["redistribute"] = switch_s
        pred.comm_exposed_s["layer_collective"] = bn_sync_s
    else:
        pred.comm_exposed_s["layer_collective"] = switch_s + bn_sync_s
    pred.details["batch_norm_sync_s"] = bn_sync_s

    everyone = nodes_spanned(plan.devices, 1, dpn, 1)
    exposed, hidden = ctx.gradient_sync(range(ctx.n_layers), bwd_list, 1, plan.devices, everyone, plan)
    pred.comm_exposed_s["gradient"], pred.comm_hidden_s["gradient"] = exposed, hidden
    pred.update_s = ctx.update_s(ctx.total_params, plan.optimizer, plan.dtype)

    ctx.set_parameters(pred, ctx.total_params, plan, plan.devices)
    p_s = plan.p_spatial
    crossing_set = set(crossing)

    def share(t) -> float:
        inside = t.producer < end
        if not inside:  # tail tensor: tail_n of n samples
            return tail_n / n
        held = 1.0 / p_s if any(s < end for s in t.savers) else 0.0
        if t.producer in crossing_set and any(s >= end for s in t.savers):
            held += 1.0 / p_s if mix else 1.0  # redistributed / gathered copy kept by the tail
        return held

    mem_key = ("spatial-memory", end, p_s, mix, tail_n / n)  # what share() depends on
    pred.activations_bytes = n * ctx.saved_bytes_per_sample(plan.dtype, mem_key, share)
    pred.comm_buffers_bytes += halo_buffer
    pred.workspace_bytes = n * ctx.workspace_per_sample(plan.dtype, mem_key, share,
                                                        lambda i: 1.0 / p_s if i < end else tail_n / n)
    pred.details.update(spatial_layers=end, crossing=[ctx.layers[p].name if p >= 0 else "input" for p in crossing],
                        nodes_inner_group=inner_n)
