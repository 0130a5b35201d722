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
from predictor.strategies.bounds import Bounds, refinement
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.data import batch_norm_sync_s, local_batch


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
    end = _table_end(_region_stops(ctx), split, ctx.n_layers)
    return end if limit is None else max(0, min(end, limit))


def _region_stops(ctx: Context) -> list[list[int]]:
    """Per spatial dim d and factor f, the first layer that is not `splittable` by f in d (its input or output
    smaller than f there, or of another rank): a split's region ends at the least of these over its dims."""
    def build():
        layers, nd, n = ctx.layers, ctx.spatial_ndim, ctx.n_layers
        out = []
        for d in range(nd):
            room = [min(l.input_shape[1 + d], l.output_shape[1 + d])
                    if len(l.input_shape) == nd + 1 and len(l.output_shape) == nd + 1 else 0 for l in layers]
            largest = max(room, default=0)
            stop = [n] * (largest + 2)  # stop[f] for f = 0 .. largest + 1
            low = largest + 1
            for i, r in enumerate(room):
                while low > r:  # factors in (r, low] first fail at layer i
                    stop[low] = i
                    low -= 1
            out.append(stop)
        return out
    return ctx.graph_cached(("spatial-region-stops",), build)


def _table_end(stops: list[list[int]], split: tuple[int, ...], n: int) -> int:
    end = n
    for stop, f in zip(stops, split):
        e = stop[f] if f < len(stop) else stop[-1]
        if e < end:
            end = e
    return end


def region_ends(ctx: Context, splits: tuple) -> tuple[int, ...]:
    """region_end(ctx, split, None) of every split in `splits` (a factorizations() tuple, cached by identity)."""
    held = ctx.graph_cached(("spatial-region-ends",), dict)
    hit = held.get(id(splits))
    if hit is None or hit[0] is not splits:
        stops = _region_stops(ctx)
        hit = held[id(splits)] = (splits, tuple(_table_end(stops, split, ctx.n_layers) for split in splits))
    return hit[1]


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


def region_exit_s(ctx: Context, crossing, n: int, p_s: int, inner_n: int, act: int, mix: bool) -> float:
    """The tensors crossing out of the region: all-gathered, or (spatial-then-data) redistributed all-to-all."""
    switch_s = 0.0
    for p in crossing:
        full = n * ctx.tensor_elems(p) * act
        if mix:
            switch_s += 2 * ctx.collective("alltoall", full / p_s, p_s, inner_n)
        else:
            switch_s += ctx.collective("allgather", full, p_s, inner_n)
    return switch_s


def region_saved(ctx: Context, dtype: str, end: int) -> tuple[float, float]:
    """(bytes per sample of the saved tensors made and saved inside a region of `end` layers, of those made after
    it): what `evaluate`'s share keeps of them at 1/p_s and at the tail's samples, the crossing copies left out."""
    by_end = ctx.graph_cached(("spatial-region-saved", dtype), dict)
    hit = by_end.get(end)
    if hit is None:
        saved = [(t.producer, min(t.savers), t.size_bytes(dtype)) for t in ctx.saved]
        hit = by_end[end] = (sum(b for producer, first, b in saved if producer < end and first < end),
                             sum(b for producer, _, b in saved if producer >= end))
    return hit


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

    bn_sync_s = batch_norm_sync_s(ctx, plan.dtype, end, plan.p_spatial, inner_n)
    crossing = ctx.crossing(end) if end < ctx.n_layers else []
    switch_s = region_exit_s(ctx, crossing, n, plan.p_spatial, inner_n, act, mix)
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


def region_bound(b: Bounds, mix: bool, p: int, p_data: int, p_s: int, end: int) -> tuple[float, float]:
    """(time, memory) bounds of spatial (mix False) or spatial-then-data over p devices, p_s of them a spatial group,
    with a region of `end` layers, which every split with that region shares: memory, the parameter state and the
    saved tensors inside the region at 1/p_s and after it at the tail's samples; time, the tail's compute and the
    region's overheads, the region's exit, batch norm's synchronisation, the gradient exchange and the update (the
    halo exchange: `refine_halo`)."""
    ctx, plan = b.ctx, b.plan
    n = b.batch // p_data
    tail_n = n // p_s if mix else n
    inside, tail = region_saved(ctx, b.dtype, end)
    memo = b.memo
    parameters = memo.get(("spatial-parameters", p > 1))
    if parameters is None:
        parameters = memo[("spatial-parameters", p > 1)] = ctx.parameter_memory(ctx.total_params, plan, p)
    memory = parameters + n * inside / p_s + tail_n * tail
    if not b.timed or b.over_cap(memory):
        return 0.0, memory
    inner_n = inner_nodes(p_s, p_data, b.dpn)
    tf, tb, _ = ctx.compute(b.dtype, ("tail", tail_n, end), range(end, ctx.n_layers), lambda i, s=Split(tail_n): s)
    crossing = ctx.crossing(end) if end < ctx.n_layers else []
    comm = region_exit_s(ctx, crossing, n, p_s, inner_n, b.act, mix) + batch_norm_sync_s(ctx, b.dtype, end, p_s,
                                                                                          inner_n)
    floor, copies = b.gradient("all", 1, p, nodes_spanned(p, 1, b.dpn, 1))
    bwd = max(tb + b.ohb_prefix[end], floor)
    update = ctx.update_s(ctx.total_params, plan.optimizer, plan.dtype)
    return tf + b.ohf_prefix[end] + bwd + update + comm + copies, memory


@refinement("spatial-halo")
def refine_halo(b: Bounds, found: tuple) -> tuple[float, float, None]:
    """The halo exchange and its buffer (the evaluation's own cache entry)."""
    _, n, split, end, inner_n = found
    ctx = b.ctx
    fwd, bwd, buffer = ctx.cached(("halo", b.dtype, n, split, end, inner_n),
                                  lambda: _halo_totals(ctx, n, split, end, inner_n, b.act))
    return fwd + bwd, buffer, None


def _end(b: Bounds, mix: bool, end: int) -> int:
    limit = b.plan.spatial_layers if mix else None
    return end if limit is None else max(0, min(end, limit))


def lower_bound(b: Bounds, strategy: str, p: int, p_data: int, inner: int, split) -> tuple | None:
    """Spatial, data+spatial or spatial-then-data over p devices with `split` (strategies.bounds): refused as
    `evaluate` refuses it; else `region_bound`, refined by `refine_halo`."""
    mix = strategy == "spatial-then-data"
    n = b.batch // p_data
    end = _end(b, mix, region_end(b.ctx, split, None))
    if end == 0 or (mix and n % inner):
        return None
    time_s, memory = region_bound(b, mix, p, p_data, inner, end)
    return time_s, memory, ("spatial-halo", n, split, end, inner_nodes(inner, p_data, b.dpn)) if b.timed else None


def group_bounds(b: Bounds, strategy: str, p: int, p_data: int, inner: int, splits: tuple, with_spatial: bool,
                 with_mix: bool, emit) -> int:
    """`lower_bound` of the spatial candidates of one (devices, inner), the search's "spatial-group": per split in
    `splits` in order, `strategy` if with_spatial and then spatial-then-data if with_mix; the bounds made once per
    region end. emit(offset in the group, strategy, split, time_s, memory_bytes, refinement) for each bounded
    candidate; returns how many the checks refuse."""
    width = with_spatial + with_mix
    n = b.batch // p_data
    mix_ok = with_mix and n % inner == 0
    settled = len(splits) if with_mix and not mix_ok else 0
    kinds = ([(False, strategy, 0)] if with_spatial else []) + ([(True, "spatial-then-data", int(with_spatial))]
                                                                 if mix_ok else [])
    inner_n = inner_nodes(inner, p_data, b.dpn)
    timed = b.timed
    by_end: dict = {}
    limit = b.plan.spatial_layers
    for j, (split, whole) in enumerate(zip(splits, region_ends(b.ctx, splits))):
        for mix, name, offset in kinds:
            end = whole if limit is None or not mix else max(0, min(whole, limit))
            if end == 0:  # the first layer cannot be split so
                settled += 1
                continue
            found = by_end.get((mix, end))
            if found is None:
                found = by_end[(mix, end)] = region_bound(b, mix, p, p_data, inner, end)
            emit(j * width + offset, name, split, found[0], found[1],
                 ("spatial-halo", n, split, end, inner_n) if timed else None)
    return settled
