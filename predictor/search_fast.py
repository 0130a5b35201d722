"""The default walk of `predictor search` (predictor.search, over predictor.search_space): the same ranking as
evaluating every candidate, from far fewer evaluations (issue 21; docs/method.md §22).

Infeasible plans are settled by the strategies' own checks without building a Plan; every other candidate gets
lower bounds on its time and memory from exact terms shared by many plans, every term left out being >= 0
(per strategy in method.md §22; data+tensor+pipeline one layout at a time, by the least bound of its variants). A
memory bound over the cap prunes the plan; the rest wait in a heap, best bound first, each bound refined (halos,
stage cuts, the KARMA chain) before its plan is evaluated, and a plan whose bound exceeds both the top-k cut and its
strategy's best is pruned. The evaluated plans are ranked in candidate order, so the result equals the exhaustive
walk's (tests/predictor/test_search_fast.py). Bounds are relaxed by MARGIN; the time bounds need costs >= 0 (which
calibrate validates for every profile), else only the memory bounds prune.
"""
from __future__ import annotations

import heapq
import math
from itertools import accumulate
from types import SimpleNamespace

from predictor.block_costs import boundary_bytes_per_sample, weight_layer_groups
from predictor.layercost import ACT_BYTES, Split
from predictor.layout import data_nodes, inner_nodes, nodes_spanned
from predictor.memory import parameter_bytes
from predictor.plan import Plan
from predictor.search_space import (RECOMPUTE_CHOICES, Counts, Ranking, candidate_specs, hybrid3d_schedules,
                                    hybrid3d_variant_count, hybrid3d_variants, megatron_layers, spec_plan)
from predictor.strategies import evaluate
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.filter import PARAMETRIC
from predictor.strategies.hybrid3d import layout_nodes
from predictor.strategies.spatial import _halo_totals
from predictor.strategies.tensor import tensor_split

MARGIN = 1e-9  # relative slack of every bound against rounding (sums taken in another order)
#: add-on plans that keep the whole model's parameters, gradients and optimizer state on every device
_WHOLE_MODEL_ADDONS = ("serial+recompute", "data+recompute")
_LOW = 1.0 - MARGIN
_INF = math.inf
_BUCKET_BYTES = Plan.__dataclass_fields__["bucket_bytes"].default  # every search plan's (DDP default)
#: cost-model wrappers that multiply the wrapped model's times by positive factors (predictor.shared_cores,
#: predictor.stacks), by class name so this module imports neither
_POSITIVE_WRAPPERS = ("SharedCores", "StackScaled")


def costs_nonnegative(cost_model) -> bool:
    """Whether every time `cost_model` returns is known to be >= 0 (module docstring)."""
    from calibrate.cost_model import ProfileCostModel
    cm = cost_model
    for _ in range(8):
        if isinstance(cm, ProfileCostModel):
            return True
        if type(cm).__name__ not in _POSITIVE_WRAPPERS or getattr(cm, "factor", 1.0) <= 0:
            return False
        cm = getattr(cm, "_cm", None)
    return False


class _Graph:
    """What the bounds need of the graph at one dtype (no cost model)."""

    def __init__(self, ctx: Context, dtype: str, optimizer: str):
        self.ctx = ctx
        layers = ctx.layers
        self.n = n = ctx.n_layers
        self.act = act = ACT_BYTES[dtype]
        self.params = ctx.params
        self.total_params = ctx.total_params
        self.param_bytes = sum(parameter_bytes(ctx.total_params, dtype, optimizer))
        self.dtype, self.optimizer = dtype, optimizer
        self.saved = [(t, t.size_bytes(dtype)) for t in ctx.saved]
        self.saved_total = sum(b for _, b in self.saved)
        # spatial: per split dim d and factor f, the first layer whose input or output is smaller than f in d
        # (or has another rank): strategies.spatial.region_end is the least of these over the split's dims
        nd = ctx.spatial_ndim
        self.region_stop: list[list[int]] = []
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
            self.region_stop.append(stop)
        self._region_ends: dict[int, tuple] = {}
        # spatial: bytes per sample surely held inside / after a region of `end` layers
        self._region_saved: dict[int, tuple[float, float]] = {}
        # filter / channel
        weighted = [i for i, l in enumerate(layers) if l.op in PARAMETRIC]
        self.min_filters = min((layers[i].channels_out for i in weighted), default=None)
        self.gathered = sorted({ctx.producer(layers[i].inputs[0] if layers[i].inputs else "") for i in weighted} - {-1})
        self.gathered_elems = [ctx.tensor_elems(t) for t in self.gathered]
        self.largest_gather = max(self.gathered_elems, default=0)
        self.last_out = layers[-1].output_elems if layers else 0
        heads = {i for i in weighted if ctx.producer(layers[i].inputs[0] if layers[i].inputs else "") < 0}
        self.split_layers = [i for i in weighted if i not in heads]
        if self.split_layers:
            self.min_channels = min(layers[i].channels_in for i in self.split_layers)
            self.first_split = first = min(self.split_layers)
            self.whole = [i for i in range(n) if i in heads or i < first]
            self.head_params = sum(ctx.params[i] for i in range(first))
            self.split_out = [layers[i].output_elems for i in self.split_layers]
            self.largest_split_out = max(self.split_out)
            self.channel_head_saved = sum(b for t, b in self.saved if t.producer < first)
            self.channel_rest_saved = sum(b for t, b in self.saved if t.producer >= first)
        self._filter_saved: dict[int, float] = {}
        # pipeline: per layer, the saved bytes it keeps (every tensor it saves) and its output elements
        self.keeps = [0.0] * n
        self.first_keeps = [0.0] * n  # each saved tensor once, at its first saver (a stage holding it keeps it)
        for t, b in self.saved:
            for s in set(t.savers):
                self.keeps[s] += b
            self.first_keeps[min(t.savers)] += b
        per_param = self.param_bytes / self.total_params if self.total_params else 0.0
        self.layer_state = [per_param * x for x in self.params]  # parameters, gradients, optimizer state per layer
        self.outputs = [l.output_elems for l in layers]
        self.cross = [ctx.crossing_elems(a) if a > 0 else 0 for a in range(n)]
        # cooperative: the whole model's weights (bytes and as its per-layer blocks sum them), the most saved
        # bytes per sample any one layer is the first to save
        self.weight_bytes = parameter_bytes(ctx.total_params, dtype, optimizer)[0]
        self.layer_weight_bytes = sum(4.0 * layer.params for layer in layers)
        first_saved = [0.0] * n
        for t, b in self.saved:
            first_saved[min(t.savers)] += b
        self.largest_first_saved = max(first_saved, default=0.0)
        # ... and per layer the bytes per sample crossing into a stage that starts there, as it reckons them
        self.boundary = boundary_bytes_per_sample(ctx.graph, list(range(n)), act)
        # out-of-core: weight bytes per block at each merge of weighted-layer groups
        single = weight_layer_groups(ctx.graph)
        self.merges = merges = sorted({1, 2, max(1, math.isqrt(len(single)))})
        self.block_weights = []
        for merge in merges:
            groups = [(single[i][0], single[min(i + merge, len(single)) - 1][1]) for i in range(0, len(single), merge)]
            self.block_weights.append([4.0 * sum(ctx.params[i] for i in range(a, z)) for a, z in groups])

    def region_end(self, split: tuple[int, ...]) -> int:
        """strategies.spatial.region_end(ctx, split, None), from the per-dimension tables."""
        end = self.n
        for stop, f in zip(self.region_stop, split):
            e = stop[f] if f < len(stop) else stop[-1]
            if e < end:
                end = e
        return end

    def region_ends(self, splits: tuple) -> tuple[int, ...]:
        """region_end of every split in `splits` (a factorizations() tuple, cached by identity)."""
        hit = self._region_ends.get(id(splits))
        if hit is None or hit[0] is not splits:
            hit = self._region_ends[id(splits)] = (splits, tuple(self.region_end(split) for split in splits))
        return hit[1]

    def region_saved(self, end: int) -> tuple[float, float]:
        hit = self._region_saved.get(end)
        if hit is None:
            inside = sum(b for t, b in self.saved if t.producer < end and min(t.savers) < end)
            tail = sum(b for t, b in self.saved if t.producer >= end)
            hit = self._region_saved[end] = (inside, tail)
        return hit

    def filter_saved(self, p: int) -> float:
        """Saved bytes per sample on one device under filter parallelism over p (strategies.filter's share)."""
        hit = self._filter_saved.get(p)
        if hit is None:
            gathered, conv = set(self.gathered), {i for i, l in enumerate(self.ctx.layers) if l.op in PARAMETRIC}
            total = 0.0
            for t, b in self.saved:
                if t.producer < 0:
                    share = 1.0
                else:
                    share = (1.0 if t.producer in gathered and any(s in conv for s in t.savers) else 0.0) + \
                        (1.0 / p if any(s not in conv for s in t.savers) else 0.0)
                total += b * share
            hit = self._filter_saved[p] = total
        return hit


class _Bounds:
    """Lower bounds of one (graph, cost model as the plans on some device counts see it)."""

    def __init__(self, ctx: Context, g: _Graph, batch: int, dpn: int, cap: float, nonnegative: bool):
        self.ctx, self.g, self.batch, self.dpn, self.cap = ctx, g, batch, dpn, cap
        self.timed = nonnegative
        coster = ctx.coster(g.dtype)
        self.coster = coster
        oh_f, oh_b = coster.overhead_s
        layers = ctx.layers
        ohf = [0.0 if l.op == "input" else oh_f for l in layers]
        ohb = [0.0 if l.op == "input" else (oh_b if (l.params or not coster.first[i]) else 0.0)
               for i, l in enumerate(layers)]
        self.ohf = ohf
        self.ohb = ohb
        self.ohf_prefix = [0.0] + list(accumulate(ohf))
        self.ohb_prefix = [0.0] + list(accumulate(ohb))
        self.update_full = ctx.update_s(g.total_params, g.optimizer, g.dtype) if nonnegative else 0.0
        self._sigma: dict = {}
        self._bn: dict = {}
        self._bn_stats: dict[int, list[float]] = {}
        self._layer_sums: dict[int, tuple] = {}
        self._whole: dict[int, tuple[float, float]] = {}
        self._p2p_mins: dict = {}
        self._sendrecvs: dict = {}
        self._cuts: dict = {}
        self._partitions: dict = {}
        self._windows: dict = {}
        self._stage_floor: dict = {}
        self._needed: dict[int, float] = {}
        self._h3d_state: dict = {}
        #: Plan fields the memory helpers read (dtype, optimizer, mixed precision), set by fast_search
        self.plan_fields = dict(dtype=g.dtype, optimizer=g.optimizer, mixed_precision="autocast")
        self._channel_divisors: dict = {}
        self._layouts: dict = {}

    # ---- shared pieces ---------------------------------------------------------------------------
    def gradient(self, key, divisor, group: int, nodes: int) -> tuple[float, float]:
        """(sum of the DDP bucket allreduces, the gradient copies) of every layer's gradients, divided by
        `divisor` (a number or one per layer), over `group` ranks on `nodes` nodes (Context.gradient_sync)."""
        k = (key, group, nodes)
        hit = self._sigma.get(k)
        if hit is None:
            layout = self._layouts.get(key)
            if layout is None:
                from predictor.overlap import bucket_layout
                ctx = self.ctx
                divs = divisor if isinstance(divisor, tuple) else (divisor,) * ctx.n_layers
                per_layer = [ctx.params[i] * 4.0 / d for i, d in zip(range(ctx.n_layers), divs)]
                layout = self._layouts[key] = ([size for _, size in bucket_layout(per_layer, _BUCKET_BYTES)],
                                               ctx.cm.memory_time_s(2 * 2 * sum(per_layer)))
            collective = self.ctx.collective
            hit = self._sigma[k] = (sum(collective("allreduce", size, group, nodes) for size in layout[0]), layout[1])
        return hit

    def layer_sums(self, m: int) -> tuple[float, float, float, float]:
        """(sum fwd, sum bwd, slowest fwd, slowest bwd) over the layers at m samples, unsplit."""
        hit = self._layer_sums.get(m)
        if hit is None:
            split = Split(m)
            times = [self.coster.times(i, split) for i in range(self.g.n)]
            hit = self._layer_sums[m] = (sum(f for f, _ in times), sum(b for _, b in times),
                                         max((f for f, _ in times), default=0.0), max((b for _, b in times), default=0.0))
        return hit

    # ---- families: None = infeasible (settled), else (time bound, memory bound[, refinement or None]) ----
    def spatial(self, mix: bool, p: int, p_data: int, p_s: int, end: int) -> tuple[float, float]:
        """(time bound, memory bound) of spatial (mix False) or spatial-then-data over p_s devices with a
        spatial region of `end` layers (every split with that region shares them; the halo is refined later)."""
        ctx, g = self.ctx, self.g
        n = self.batch // p_data
        tail_n = n // p_s if mix else n
        inside, tail = g.region_saved(end)
        grads = g.total_params * 4.0 if p > 1 else 0.0
        memory = g.param_bytes + grads + n * inside / p_s + tail_n * tail
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory
        dpn = self.dpn
        inner_n = inner_nodes(p_s, p_data, dpn)
        tf, tb, _ = ctx.compute(g.dtype, ("tail", tail_n, end), range(end, g.n), lambda i, s=Split(tail_n): s)
        fwd = tf + self.ohf_prefix[end]
        bwd = tb + self.ohb_prefix[end]
        comm = 0.0
        if end < g.n:
            act = g.act
            for t in ctx.crossing(end):
                full = n * ctx.tensor_elems(t) * act
                comm += 2 * ctx.collective("alltoall", full / p_s, p_s, inner_n) if mix else \
                    ctx.collective("allgather", full, p_s, inner_n)
        comm += self._bn_sync(end, p_s, inner_n)
        if p > 1:
            sigma, copies = self.gradient("all", 1, p, nodes_spanned(p, 1, dpn, 1))
            bwd = max(bwd, sigma)
            comm += copies
        return fwd + bwd + self.update_full + comm, memory

    def _bn_sync(self, end: int, p_s: int, inner_n: int) -> float:
        k = (end, p_s, inner_n)
        hit = self._bn.get(k)
        if hit is None:
            stats = self._bn_stats.get(end)
            if stats is None:
                layers = self.ctx.layers
                stats = self._bn_stats[end] = [(2 * layers[i].channels_in + 1) * self.g.act for i in range(end)
                                               if layers[i].op == "batchnorm"]
            hit = self._bn[k] = sum(2 * self.ctx.collective("allreduce", size, p_s, inner_n) for size in stats)
        return hit

    def refine_spatial(self, args) -> tuple[float, float, None]:
        """The halo exchange (the evaluation reuses it: same cache entry as strategies.spatial)."""
        n, split, end, inner_n = args
        ctx, g = self.ctx, self.g
        fwd, bwd, buffer = ctx.cached(("halo", g.dtype, n, split, end, inner_n),
                                      lambda: _halo_totals(ctx, n, split, end, inner_n, g.act))
        return fwd + bwd, buffer, None

    def filter(self, p: int, p_data: int) -> tuple | None:
        g, ctx = self.g, self.ctx
        if g.min_filters is None or g.min_filters < p:
            return None
        n = self.batch // p_data
        local = g.total_params / p
        memory = sum(parameter_bytes(local, g.dtype, g.optimizer)) + (local * 4.0 if p_data > 1 else 0.0) + \
            n * g.filter_saved(p) + n * g.largest_gather * g.act
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory, None
        comm, _ = self.layer_collectives(("filter", n, p, p_data))
        fwd, bwd = self.ohf_prefix[-1], self.ohb_prefix[-1]
        if p_data > 1:
            sigma, copies = self.gradient(("filter", p), p, p_data, data_nodes(p_data, p, self.dpn))
            bwd = max(bwd, sigma)
            comm += copies
        return fwd + bwd + ctx.update_s(local, g.optimizer, g.dtype) + comm, memory, None

    def channel(self, p: int, p_data: int) -> tuple | None:
        g, ctx = self.g, self.ctx
        if not g.split_layers or g.min_channels < p:
            return None
        n = self.batch // p_data
        local = g.head_params + (g.total_params - g.head_params) / p
        memory = sum(parameter_bytes(local, g.dtype, g.optimizer)) + (local * 4.0 if p_data > 1 else 0.0) + \
            n * (g.channel_head_saved + g.channel_rest_saved / p) + n * g.largest_split_out * g.act
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory, None
        comm, _ = self.layer_collectives(("channel", n, p, p_data))
        fwd, bwd = self._whole_times(n)
        if p_data > 1:
            divisors = self._channel_divisors.get(p)
            if divisors is None:
                divisors = self._channel_divisors[p] = tuple(1 if i < g.first_split else p for i in range(g.n))
            sigma, copies = self.gradient(("channel", p), divisors, p_data, data_nodes(p_data, p, self.dpn))
            bwd = max(bwd, sigma)
            comm += copies
        return fwd + bwd + ctx.update_s(local, g.optimizer, g.dtype) + comm, memory, None

    def layer_collectives(self, args) -> tuple[float, float]:
        """Filter / channel parallelism: the per-layer collectives (as strategies.filter / channel issue them)."""
        kind, n, p, p_data = args
        ctx, g = self.ctx, self.g
        act, collective = g.act, ctx.collective
        nodes = inner_nodes(p, p_data, self.dpn)
        comm = 0.0
        if kind == "filter":
            for elems in g.gathered_elems:
                size = n * elems * act
                comm += collective("allgather", size, p, nodes) + collective("reduce_scatter", size, p, nodes)
            comm += collective("allgather", n * g.last_out * act, p, nodes)
        else:
            for elems in g.split_out:
                size = n * elems * act
                comm += collective("allreduce", size, p, nodes) + collective("allgather", size, p, nodes)
        return comm, 0.0

    def _whole_times(self, n: int) -> tuple[float, float]:
        """Channel parallelism: the unsplit layers' compute at n samples + every other layer's overheads."""
        hit = self._whole.get(n)
        if hit is None:
            fwd, bwd = self.ohf_prefix[-1], self.ohb_prefix[-1]
            split = Split(n)
            for i in self.g.whole:
                f, b = self.coster.times(i, split)
                fwd += f - self.ohf[i]
                bwd += b - self.ohb[i]
            hit = self._whole[n] = (fwd, bwd)
        return hit

    def pipeline(self, p_data: int, K: int, S: int) -> tuple:
        g = self.g
        b = self.batch // p_data
        m = b // S
        memory = max(self._layer_memory(b, m), (b * g.saved_total + g.param_bytes) / K)
        if K < self._stages_needed(b):  # no cut into K contiguous stages keeps every stage within the cap
            memory = _INF
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory, None
        fsum, bsum, fmax, bmax = self.layer_sums(m)
        time_s = (S - 1) * (max(fsum / K, fmax) + max(bsum / K, bmax)) + fsum + bsum
        if K > 1:
            time_s += 2 * (S + K - 2) * self._p2p_min(m, 2 if K - 1 >= self.dpn else 1)
        return time_s, memory, ("window", m, K, S, p_data, time_s)

    # ---- data+tensor+pipeline: one layout (p_data, t, K) and its variants (search_space.hybrid3d_variants) ----
    def _h3d_layout(self, p_data: int, t: int, K: int):
        """(a stand-in plan of the layout for the memory helpers, the nodes a tensor group spans)."""
        plan = SimpleNamespace(p_data=p_data, p_tensor=t, stages=K, devices_per_node=self.dpn, **self.plan_fields)
        return plan, layout_nodes(plan)[0]

    def _h3d_params(self, p_data: int, t: int, K: int, zero: int) -> float:
        """Parameter, gradient and optimizer bytes of total / (t · K) parameters with or without the distributed
        optimizer: each of the t · K model-parallel ranks holds at least that share (a split layer 1/t of its
        parameters, the vocabulary-split embedding 1/t, a replicated layer all; the heaviest of the K pipeline
        ranks at least their mean), and both memory models are linear in the parameters."""
        k = (p_data, t * K, zero)
        hit = self._h3d_state.get(k)
        if hit is None:
            from predictor.strategies.hybrid3d import zero1_parameter_bytes
            plan, _ = self._h3d_layout(p_data, t, K)
            share = self.g.total_params / (t * K)
            hit = self._h3d_state[k] = sum(zero1_parameter_bytes(share, plan) if zero else parameter_bytes(
                share, plan.dtype, plan.optimizer, plan.mixed_precision))
        return hit

    def _h3d_update(self, p_data: int, t: int, K: int, zero: int) -> float:
        """The update of the mean rank's share (the slowest rank updates at least that many parameters)."""
        if not self.timed:
            return 0.0
        from predictor.layercost import update_time_s
        plan, _ = self._h3d_layout(p_data, t, K)
        share = self.g.total_params / (t * K) / (p_data if zero else 1)
        return update_time_s(self.ctx.cm, share, plan.optimizer, plan.dtype, plan.mixed_precision)

    def _h3d_stragglers(self, p: int, inner: int) -> float:
        """The least relative straggler excess on the terms a bound keeps (predictor.at_scale.straggler_s): compute,
        recomputation, bubble and update take the device and step excess of all p ranks, the layer collectives the
        collective excess of the t · K model-parallel group."""
        if not self.timed or p <= 1:
            return 0.0
        from predictor.at_scale import _excess
        cm = self.ctx.cm
        return max(0.0, min(_excess(cm, "device", p) + _excess(cm, "step", p), _excess(cm, "collective", inner)))

    def hybrid3d_group(self, p: int, p_data: int, t: int, K: int, schedules: tuple, layers: int) -> tuple | None:
        """Every variant of one data+tensor+pipeline layout (search_space.hybrid3d_variants; schedules: its
        hybrid3d_schedules): None when evaluate refuses them all (t is not a degree the model splits into, more
        stages than transformer layers); else (time bound, memory bound), the least of `hybrid3d_variant`'s over
        the variants: no recomputation, the cheaper of with and without sequence parallelism, the most virtual
        stages S allows, the distributed optimizer where there are replicas. layers: the transformer layers
        (search_space.megatron_layers)."""
        from predictor.strategies.hybrid3d import search_totals
        from predictor.strategies.tensor import check_degree
        ctx = self.ctx
        ts = ctx.graph_cached(("tensor-split",), lambda: tensor_split(ctx.graph))
        if layers and K > layers:
            return None
        if t > 1:
            try:
                check_degree(ctx, ts, t)
            except Infeasible:
                return None
        zero = 1 if p_data > 1 else 0
        memory = self._h3d_params(p_data, t, K, zero)
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory
        _, nodes = self._h3d_layout(p_data, t, K)
        b, dtype = self.batch // p_data, self.g.dtype
        best = _INF
        for s, vs in schedules:
            v = max(vs)
            core = min(search_totals(ctx, ts, dtype, t, b // s, nodes, sp)[0] for sp in ((False, True) if t > 1
                                                                                          else (False,)))
            best = min(best, core * (s + (K - 1) / v) / K)
        factor = 1.0 + self._h3d_stragglers(p, t * K)
        return (best + self._h3d_update(p_data, t, K, zero)) * factor, memory

    def hybrid3d_variant(self, p: int, p_data: int, t: int, K: int, variant: tuple) -> tuple[float, float]:
        """(time bound, memory bound) of one data+tensor+pipeline candidate (strategies.hybrid3d): with C the whole
        graph's forward + backward + tensor collectives and R its recomputed forward at micro-batch m
        (hybrid3d.search_totals), the slowest of K ranks runs at least (C + R) / K per micro-batch, so
        S · (F + Bw + R) + bubble >= (C + R) (S + (K - 1) / v) / K; plus the mean rank's update; all times the least
        straggler excess. Memory: the parameter state (`_h3d_params`) and, on the mean rank, the least number of
        (chunk) micro-batches any rank holds times 1/K of the saved bytes per sample (hybrid3d.saved_totals)."""
        from predictor.strategies.hybrid3d import saved_totals, search_totals
        s, v, recompute, sp, zero = variant
        ctx = self.ctx
        ts = ctx.graph_cached(("tensor-split",), lambda: tensor_split(ctx.graph))
        m = self.batch // p_data // s
        saved = saved_totals(ctx, ts, self.g.dtype, t, sp)[RECOMPUTE_CHOICES.index(recompute)]
        flight = 1 if v == 1 else min(s * v, (v - 1) * K + 1)  # strategies.pipeline.in_flight at the last rank
        memory = self._h3d_params(p_data, t, K, zero) + flight * m * saved / (K * v)
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory
        _, nodes = self._h3d_layout(p_data, t, K)
        core, selective, full = search_totals(ctx, ts, self.g.dtype, t, m, nodes, sp)
        redo = {"none": 0.0, "selective": selective, "full": full}[recompute]
        time_s = (core + redo) * (s + (K - 1) / v) / K + self._h3d_update(p_data, t, K, zero)
        return time_s * (1.0 + self._h3d_stragglers(p, t * K)), memory

    def _stages_needed(self, b: int) -> float:
        """The fewest contiguous stages whose every one holds, within the cap, its layers' parameter state and their
        saved tensors for b samples (each tensor at its first saver): a pipeline of fewer stages cannot fit, whatever
        its cut (greedy packing is optimal for a bottleneck threshold). inf when one layer alone exceeds the cap."""
        hit = self._needed.get(b)
        if hit is None:
            cap, g = self.cap, self.g
            stages, acc = 1, 0.0
            for keep, state in zip(g.first_keeps, g.layer_state):
                w = b * keep + state
                if w > cap:
                    stages = _INF
                    break
                acc += w
                if acc > cap:
                    stages, acc = stages + 1, w
            hit = self._needed[b] = stages
        return hit

    def _layer_memory(self, b: int, m: int) -> float:
        """The most any stage holding one layer needs: its saved tensors for b samples, its gradients for m."""
        k = (b, m)
        hit = self._stage_floor.get(k)
        if hit is None:
            act = self.g.act
            hit = self._stage_floor[k] = max((b * keep + 2 * m * act * out for keep, out in zip(self.g.keeps, self.g.outputs)),
                                             default=0.0)
        return hit

    def _p2p_min(self, m: int, nodes: int) -> float:
        k = (m, nodes)
        hit = self._p2p_mins.get(k)
        if hit is None:
            hit = self._p2p_mins[k] = min(self._sendrecv(m, nodes)[1:], default=0.0)
        return hit

    def _sendrecv(self, m: int, nodes: int) -> list[float]:
        """Per layer a (>= 1): the send/receive of the tensors crossing into a stage starting there."""
        k = (m, nodes)
        hit = self._sendrecvs.get(k)
        if hit is None:
            act, ctx = self.g.act, self.ctx
            hit = self._sendrecvs[k] = [0.0] + [ctx.collective("sendrecv", m * c * act, 2, nodes) for c in self.g.cross[1:]]
        return hit

    def refine_pipeline(self, args) -> tuple[float, float, tuple | None]:
        """First ("window"): stage k starts at a layer in [k, n - K + k], so its boundary transfer is at least the
        cheapest there. Then ("cut"): the stage cut itself (strategies.pipeline.partition of the same per-layer
        costs, so the same cut): the slowest stage's compute and boundary transfer as evaluated, and per stage a
        gradient exposure of at least its bucket allreduces' sum minus its last micro-batch's backward (the
        allreduces follow one another)."""
        level, m, K, S, p_data, bound = args
        if K <= 1:
            return 0.0, 0.0, None
        if level == "window":
            k = (m, K)
            worst = self._windows.get(k)
            if worst is None:
                n, dpn = self.g.n, self.dpn
                worst = 0.0
                for stage in range(1, K):
                    costs = self._sendrecv(m, 1 if (stage - 1) // dpn == stage // dpn else 2)
                    worst = max(worst, min(costs[stage:n - K + stage + 1]))
                self._windows[k] = worst
            extra = 2 * (S + K - 2) * (worst - self._p2p_min(m, 2 if K - 1 >= self.dpn else 1))
            return extra, 0.0, ("cut", m, K, S, p_data, bound + extra)
        fwd, bwd, p2p, stages, total = self._cut(K, m)
        time_s = (S - 1) * (fwd + bwd) + total + 2 * (S + K - 2) * p2p
        if p_data > 1:
            nodes, collective = data_nodes(p_data, K, self.dpn), self.ctx.collective
            time_s += max(max(0.0, sum(collective("allreduce", size, p_data, nodes) for size in sizes) - last)
                          for sizes, last in stages)
        return max(0.0, time_s - bound), 0.0, None

    def _cut(self, K: int, m: int) -> tuple:
        """(slowest stage forward, slowest backward, slowest boundary send/receive, per stage its DDP bucket sizes
        and its backward per micro-batch, every stage's forward and backward summed) of K stages at micro-batch m,
        as strategies.pipeline computes them."""
        key = (K, m)
        hit = self._cuts.get(key)
        if hit is None:
            from predictor.overlap import bucket_layout, ready_times
            ctx, g, dpn = self.ctx, self.g, self.dpn
            per_layer, starts = self._starts(K, m)
            cut = list(zip(starts, starts[1:] + [g.n]))
            fwd = max(sum(per_layer[i][0] for i in range(a, z)) for a, z in cut)
            bwd = max(sum(per_layer[i][1] for i in range(a, z)) for a, z in cut)
            p2p = 0.0
            for k in range(1, K):
                nodes = 1 if (k - 1) // dpn == k // dpn else 2
                p2p = max(p2p, ctx.collective("sendrecv", m * g.cross[starts[k]] * g.act, 2, nodes))
            stages = []
            for a, z in cut:
                ready = ready_times([per_layer[i][1] for i in range(a, z)])
                stages.append(([size for _, size in bucket_layout([ctx.params[i] * 4.0 for i in range(a, z)],
                                                                  _BUCKET_BYTES)], ready[-1] if ready else 0.0))
            total = sum(f + b for f, b in per_layer)
            hit = self._cuts[key] = (fwd, bwd, p2p, stages, total)
        return hit

    def _starts(self, K: int, m: int) -> tuple[list, list[int]]:
        """(per-layer (fwd, bwd) at m samples, the first layer of each of K stages): strategies.pipeline's cut,
        which the cooperative strategy makes too (the same costs: its per-layer blocks' times)."""
        key = (K, m)
        hit = self._partitions.get(key)
        if hit is None:
            from predictor.strategies.pipeline import partition
            split = Split(m)
            per_layer = [self.coster.times(i, split) for i in range(self.g.n)]
            hit = self._partitions[key] = (per_layer, partition([f + bw for f, bw in per_layer], K))
        return hit

    def outofcore(self, p: int, on: str) -> tuple:
        """Out-of-core data parallelism over p devices: its iteration is the KARMA chain's end, after the
        compute and after every block's allreduce (predictor.outofcore.data_parallel_iteration)."""
        if not self.timed or self.ctx.cm.device_is_host:
            return 0.0, 0.0, None
        ctx, g = self.ctx, self.g
        b = self.batch // p
        split = Split(b)
        fwd, bwd, _ = ctx.compute(g.dtype, ("all", split), range(g.n), lambda i: split)
        nodes = data_nodes(p, 1, self.dpn)
        chain = min(sum(ctx.collective("allreduce", w, p, nodes) for w in weights) for weights in g.block_weights)
        bound = max(fwd + bwd, chain)
        return bound, 0.0, (p, on, bound)

    def refine_outofcore(self, args) -> tuple[float, float, None]:
        """The same chain with every block kept (no swap or recompute exposure) at each block grouping the
        planner may pick: the planner's choice only delays it (every step of the chain is a max or a sum)."""
        from predictor import outofcore
        from predictor.layercost import update_bytes
        from predictor.outofcore_strategies import _blocks
        from profiler.errors import UserError
        p, on, bound = args
        ctx, g = self.ctx, self.g
        cm = ctx.cm
        nodes, sharing = data_nodes(p, 1, self.dpn), min(p, self.dpn)

        def allreduce(size):
            return ctx.collective("allreduce", size, p, nodes)

        if on == "host":
            stream = dict(d2h_s=lambda size: cm.host_device_time_s(size, "d2h"),
                          h2d_s=lambda size: cm.host_device_time_s(size, "h2d"),
                          host_update_s=lambda size: cm.memory_time_s(
                              sharing * update_bytes(size / 4, g.optimizer, g.dtype), where="host"))
        else:
            stream = dict(d2h_s=_no_time, h2d_s=_no_time, host_update_s=_no_time)
        lowest = _INF
        try:
            for merge in g.merges:
                blocks = _blocks(ctx, g.dtype, self.batch // p, per_layer=False, merge=merge)
                keep = outofcore.OutOfCorePlan((outofcore.KEEP,) * len(blocks), 0.0, 0.0, 0.0, 0.0, 0.0)
                lowest = min(lowest, outofcore.data_parallel_iteration(keep, blocks, allreduce_s=allreduce,
                                                                       **stream).iteration_s)
        except UserError:  # no host coefficient: the evaluation says so
            return 0.0, 0.0, None
        if on == "device":  # the update runs on the device after the backward pass
            lowest += ctx.update_s(g.total_params, g.optimizer, g.dtype)
        return max(0.0, lowest - bound), 0.0, None


    def cooperative(self, k: int, m: int) -> tuple | None:
        """Cooperative processes (predictor.cooperative) over k devices with m micro-batches: infeasible
        as outofcore_strategies.evaluate_cooperative says; memory >= the whole model's weights + two
        micro-batches of any one layer's saved tensors; time >= m x the mean stage's compute + the weights'
        all-gather."""
        g, ctx = self.g, self.ctx
        if k > g.n or self.batch % m or self.batch % k:
            return None
        n = self.batch // m
        memory = g.weight_bytes + 2 * n * g.largest_first_saved
        if not self.timed or memory * _LOW > self.cap:
            return 0.0, memory, None
        fsum, bsum, _, _ = self.layer_sums(n)
        gather = ctx.collective("allgather", g.layer_weight_bytes, k, inner_nodes(k, 1, self.dpn))
        time_s = m * (fsum + bsum) / k + gather
        return time_s, memory, (k, m, time_s, memory)

    def refine_cooperative(self, args) -> tuple[float, float, None]:
        """With the stage cut itself (predictor.cooperative.cooperative): memory >= the weights + the largest
        stage-input stash + the prediction step's peak (every stage holds both); time >= m x the slowest
        stage's step + (k - 1) x the slowest backward + the weights' all-gather."""
        from predictor.outofcore_strategies import _blocks
        k, m, time_bound, memory_bound = args
        ctx, g, batch = self.ctx, self.g, self.batch
        n = batch // m
        per_layer, starts = self._starts(k, n)
        boundary = [g.boundary[a] for a in starts]
        slices = _blocks(ctx, g.dtype, max(1, batch // k), per_layer=True)
        peak = max((b.input_bytes + b.activation_bytes for b in slices[: starts[-1]]), default=0.0) + \
            max(boundary) * (batch / k) * k
        memory = g.weight_bytes + max(b * n * m for b in boundary) + peak
        cut = list(zip(starts, starts[1:] + [g.n]))
        step = max(sum(per_layer[i][0] + per_layer[i][1] for i in range(a, z)) for a, z in cut)
        backward = max(sum(per_layer[i][1] for i in range(a, z)) for a, z in cut)
        gather = ctx.collective("allgather", g.layer_weight_bytes, k, inner_nodes(k, 1, self.dpn))
        time_s = m * step + (k - 1) * backward + gather
        return max(0.0, time_s - time_bound), max(0.0, memory - memory_bound), None


_REFINE = {"spatial": _Bounds.refine_spatial, "pipeline": _Bounds.refine_pipeline, "outofcore": _Bounds.refine_outofcore,
           "cooperative": _Bounds.refine_cooperative}


def _no_time(size: float) -> float:
    return 0.0


def fast_search(ctx: Context, ranking: Ranking, counts: Counts, *, batch: int, devices: range, devices_per_node: int,
                dtype: str, optimizer: str, cap: float, strategies, plan_options: dict | None = None) -> None:
    """Feed `ranking` what evaluating every candidate would, counting into `counts`."""
    graph = ctx.graph
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer, **(plan_options or {}))
    g = _Graph(ctx, dtype, optimizer)
    timed = costs_nonnegative(ctx.cm)
    bounders: dict[int, _Bounds] = {}
    objective_cost = ranking.objective == "cost"
    records = []  # (score bound, index, time bound, memory bound, spec, bounder, refine args)
    current_p, bounds = None, None
    index = 0
    layers_3d = megatron_layers(graph) if "data+tensor+pipeline" in strategies else 0
    for spec in candidate_specs(graph, batch, devices, devices_per_node, dtype, optimizer, strategies, grouped=True,
                                plan_options=plan_options):
        kind = spec[0]
        if kind == "addon":
            plan = spec[1]
            p = plan.devices
        else:
            p = spec[2]
        if p != current_p:  # the context evaluate() uses for plans on p devices (shared cores, stacks)
            current_p = p
            pctx = ctx.for_plan(Plan("data", devices=p, p_data=p, **base))
            bounds = bounders.get(id(pctx))
            if bounds is None:
                bounds = bounders[id(pctx)] = _Bounds(pctx, g, batch, devices_per_node, cap, timed)
                bounds.plan_fields.update({k: base[k] for k in ("mixed_precision",) if k in base})
        if kind == "spatial-group":
            _, strategy, p, p_data, p_s, splits, with_spatial, with_mix = spec
            width = with_spatial + with_mix
            mix_ok = with_mix and (batch // p_data) % p_s == 0
            if with_mix and not mix_ok:  # group batch not divisible by the split: infeasible, every split
                counts.evaluated += len(splits)
            by_end: dict = {}
            inner_n = inner_nodes(p_s, p_data, devices_per_node)
            n = batch // p_data
            for j, (split, end) in enumerate(zip(splits, g.region_ends(splits))):
                if end == 0:  # the first layer cannot be split so: infeasible (both kinds)
                    counts.evaluated += with_spatial + mix_ok
                    continue
                for mix, name, offset in ((False, strategy, 0), (True, "spatial-then-data", with_spatial)):
                    if not (mix_ok if mix else with_spatial):
                        continue
                    found = by_end.get((mix, end))
                    if found is None:
                        found = by_end[(mix, end)] = bounds.spatial(mix, p, p_data, p_s, end)
                    time_s, memory = found
                    if memory * _LOW > cap:
                        counts.pruned += 1
                        continue
                    time_s *= _LOW
                    records.append((p * time_s / batch if objective_cost else time_s, index + j * width + offset,
                                    time_s, memory, ("spatial", name, p, p_data, p_s, split), bounds,
                                    (n, split, end, inner_n) if timed else None))
            index += len(splits) * width
            continue
        if kind == "3d-group":  # one layout's variants: bounded together, expanded when the layout's turn comes
            _, strategy, p, p_data, inner, (t, K) = spec
            size = hybrid3d_variant_count(t, K, p_data, batch // p_data, layers_3d)
            found = bounds.hybrid3d_group(p, p_data, t, K, hybrid3d_schedules(K, batch // p_data, layers_3d),
                                          layers_3d)
            if found is None:  # every variant infeasible by evaluate's own checks
                counts.evaluated += size
            elif found[1] * _LOW > cap:
                counts.pruned += size
            else:
                time_s = found[0] * _LOW
                records.append((p * time_s / batch if objective_cost else time_s, index, time_s, found[1], spec,
                                bounds, ("3d-group", size)))
            index += size
            continue
        refine = None
        if kind == "pipeline":
            found = bounds.pipeline(spec[3], spec[4], spec[5])
        elif kind == "filter":
            found = bounds.filter(spec[4], spec[3])
        elif kind == "channel":
            found = bounds.channel(spec[4], spec[3])
        elif kind == "addon" and plan.strategy == "outofcore":
            found = bounds.outofcore(p, dict(plan.extra).get("optimizer_on", "host"))
        elif kind == "addon" and plan.strategy == "cooperative":
            found = bounds.cooperative(plan.stages, plan.micro_batches)
        elif kind == "data" or (kind == "addon" and plan.strategy in _WHOLE_MODEL_ADDONS):
            found = 0.0, g.param_bytes, None  # every replica holds the whole model's state (no ZeRO here)
        else:
            found = 0.0, 0.0, None
        index += 1
        if found is None:  # infeasible by the strategy's own check: that is its evaluation
            counts.evaluated += 1
            continue
        time_s, memory, refine = found
        if memory * _LOW > cap:
            counts.pruned += 1
            continue
        time_s *= _LOW
        score = p * time_s / batch if objective_cost else time_s
        records.append((score, index - 1, time_s, memory, spec, bounds, refine))
    heapq.heapify(records)  # smallest bound first (ties: candidate order); index makes every key unique

    top = ranking.top
    worst: list[float] = []  # max-heap (negated) of the `top` best scores evaluated so far
    best: dict[str, float] = {}
    kept = []  # (candidate index, prediction) of the evaluated plans that fit
    while records:
        score, index, time_s, memory, spec, bounds, refine = heapq.heappop(records)
        plan_strategy = spec[1].strategy if spec[0] == "addon" else spec[1]
        threshold = -worst[0] if len(worst) >= top else _INF
        kind = spec[0]
        if score > threshold and time_s > best.get(plan_strategy, _INF):
            counts.pruned += refine[1] if kind == "3d-group" else 1
            continue
        if kind == "3d-group":  # expand the layout into its variants, each with its own bounds
            _, strategy, p, p_data, inner, (t, K) = spec
            for j, variant in enumerate(hybrid3d_variants(t, K, p_data, batch // p_data, layers_3d)):
                time_v, memory_v = bounds.hybrid3d_variant(p, p_data, t, K, variant)
                if memory_v * _LOW > cap:
                    counts.pruned += 1
                    continue
                time_v *= _LOW
                heapq.heappush(records, (p * time_v / batch if objective_cost else time_v, index + j, time_v,
                                         memory_v, ("3d", strategy, p, p_data, inner, (t, K) + variant), bounds, None))
            continue
        if refine is not None:  # tighten the bound, and wait for the turn of the tighter one
            extra_s, extra_bytes, refine = _REFINE[plan_strategy if kind == "addon" else kind](bounds, refine)
            memory += extra_bytes
            if memory * _LOW > cap:
                counts.pruned += 1
                continue
            if extra_s > 0 or refine is not None:
                time_s += extra_s * _LOW
                score = (spec[1].devices if kind == "addon" else spec[2]) * time_s / batch if objective_cost else time_s
                heapq.heappush(records, (score, index, time_s, memory, spec, bounds, refine))
                continue
        pred = evaluate(ctx, spec_plan(spec, base), cap)
        if not counts.tally(pred):
            continue
        kept.append((index, pred))
        exact = ranking.score(pred)
        if len(worst) < top:
            heapq.heappush(worst, -exact)
        elif exact < -worst[0]:
            heapq.heapreplace(worst, -exact)
        if pred.iteration_s < best.get(plan_strategy, _INF):
            best[plan_strategy] = pred.iteration_s
    kept.sort(key=lambda item: item[0])
    for index, pred in kept:
        ranking.add(index, pred)
