"""The candidate space of `predictor search` and its ranking (predictor.search walks it; predictor.search_fast
walks it with bounds): the strategies searched, every plan in the search's order (as light tuples and as Plans),
the evaluated/pruned counts and the `top` best by objective. The candidates are listed in predictor.search's
docstring."""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterator

from predictor.graph import ModelGraph
from predictor.outofcore_strategies import SEARCH_FAMILIES, search_candidates
from predictor.plan import Plan, Prediction, sharding_choices
from predictor.strategies.context import Context
from predictor.strategies.tensor import tensor_split

SEARCH_STRATEGIES = ("data", "filter", "channel", "spatial", "pipeline", "spatial-then-data", "tensor",
                     "data+tensor+pipeline")
# add-on families (predictor/outofcore_strategies.py): recompute, outofcore, cooperative
SEARCH_STRATEGIES += tuple(SEARCH_FAMILIES)


@dataclass
class Counts:
    """Plans a search evaluated (and of those, runnable and within the memory cap), and plans it pruned."""

    evaluated: int = 0
    feasible: int = 0
    fitting: int = 0
    pruned: int = 0

    def tally(self, pred: Prediction) -> bool:
        """Count one evaluated plan; whether it is feasible and fits."""
        self.evaluated += 1
        if not pred.feasible:
            return False
        self.feasible += 1
        if not pred.fits:
            return False
        self.fitting += 1
        return True


@lru_cache(maxsize=1 << 16)
def divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


@lru_cache(maxsize=1 << 16)
def factorizations(p: int, ndim: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered way to write p as a product of ndim positive factors."""
    if ndim == 1:
        return ((p,),)
    return tuple((d, *rest) for d in divisors(p) for rest in factorizations(p // d, ndim - 1))


@lru_cache(maxsize=64)
def megatron_3d_shape(graph: ModelGraph) -> tuple[int, int]:
    """(the gcd of the column/row pairs' split widths, the blocks between the graph's cut points) of a transformer
    graph, the tensor degrees and the most pipeline stages data+tensor+pipeline can take; (0, 0) for a graph
    without attention (a bmm or sdpa layer) or without pairs: Megatron's layout cuts between transformer layers."""
    from predictor.strategies.hybrid3d import cut_points

    ts = tensor_split(graph)
    if not ts.columns or not any(layer.op in ("bmm", "sdpa") for layer in graph.layers):
        return 0, 0
    return ts.width_gcd, len(cut_points(Context(graph, None)))


#: what data+tensor+pipeline candidates recompute: nothing, the attention cores (selective), every transformer layer
RECOMPUTE_CHOICES = ("none", "selective", "full")


@lru_cache(maxsize=64)
def megatron_layers(graph: ModelGraph) -> int:
    """The transformer layers Megatron's layout deals out to pipeline chunks (strategies.hybrid3d.repeated_layers),
    0 for a graph whose layers do not repeat."""
    from predictor.strategies.hybrid3d import repeated_layers

    ts = tensor_split(graph)
    starts = repeated_layers(Context(graph, None), ts) if ts.columns else None
    return len(starts) - 1 if starts else 0


@lru_cache(maxsize=1 << 14)
def hybrid3d_variants(t: int, stages: int, p_data: int, per_pipeline: int, layers: int) -> tuple[tuple, ...]:
    """The data+tensor+pipeline candidates of one layout (t tensor ranks, `stages` pipeline ranks, p_data replicas
    of `per_pipeline` samples each), in the search's order, as (micro-batches S, virtual stages v, recomputation,
    sequence parallelism, ZeRO stage): every S dividing the samples; 1F1B (v = 1) and, where Megatron can run it
    (the L transformer layers divide into stages · v chunks of whole layers and S is a multiple of the stages), the
    interleaved schedule with every such v >= 2; each RECOMPUTE_CHOICES; sequence parallelism off and, with t > 1,
    on; the distributed optimizer (ZeRO stage 1) off and, with replicas, on."""
    out = []
    for s, vs in hybrid3d_schedules(stages, per_pipeline, layers):
        for v in vs:
            for recompute in RECOMPUTE_CHOICES:
                for sp in ((False, True) if t > 1 else (False,)):
                    for zero in ((0, 1) if p_data > 1 else (0,)):
                        out.append((s, v, recompute, sp, zero))
    return tuple(out)


@lru_cache(maxsize=1 << 14)
def hybrid3d_schedules(stages: int, per_pipeline: int, layers: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(micro-batches S, the virtual-stage counts v searched with it) of `hybrid3d_variants`, in its order (no
    interleaving on one stage)."""
    out = []
    for s in divisors(per_pipeline):
        vs = (1,)
        if stages >= 2 and layers and layers % stages == 0 and s % stages == 0:
            vs += tuple(v for v in divisors(layers // stages) if v >= 2)
        out.append((s, vs))
    return tuple(out)


def hybrid3d_variant_count(t: int, stages: int, p_data: int, per_pipeline: int, layers: int) -> int:
    """len(hybrid3d_variants(...)), without listing them."""
    per = len(RECOMPUTE_CHOICES) * (2 if t > 1 else 1) * (2 if p_data > 1 else 1)
    return per * sum(len(vs) for _, vs in hybrid3d_schedules(stages, per_pipeline, layers))


def candidate_specs(graph: ModelGraph, batch: int, devices: range, devices_per_node: int, dtype: str,
                    optimizer: str, strategies=SEARCH_STRATEGIES, grouped: bool = False,
                    plan_options: dict | None = None) -> Iterator[tuple]:
    """The search's candidates in order, as light tuples (`spec_plan` makes each a Plan):
    (kind, strategy, devices, p_data, inner, split or micro-batches), or ("addon", plan); a data+tensor+pipeline
    candidate ("3d", strategy, devices, p_data, inner, (t, stages) + one of `hybrid3d_variants`). grouped=True yields
    the spatial candidates of one (devices, inner) as one tuple ("spatial-group", strategy, devices, p_data,
    inner, splits, with spatial, with spatial-then-data) standing for, per split in order, the spatial
    candidate and then the spatial-then-data one (those of the two the strategies ask for), and the
    data+tensor+pipeline candidates of one layout as ("3d-group", strategy, devices, p_data, inner, (t, stages))
    standing for its `hybrid3d_variants` in order. plan_options: Plan
    fields every candidate shares (framework, synthetic_data), set on the add-on plans here and by spec_plan's
    base on the others."""
    nd = len(graph.input_shape) - 1
    want_spatial, want_mix = "spatial" in strategies, "spatial-then-data" in strategies
    # tensor degrees: those dividing every split width of the column/row pairs (0: the graph has none)
    tensor_widths = tensor_split(graph).width_gcd if "tensor" in strategies else 0
    widths_3d, blocks_3d = megatron_3d_shape(graph) if "data+tensor+pipeline" in strategies else (0, 0)
    layers_3d = megatron_layers(graph) if widths_3d else 0
    for p in devices:
        for inner in divisors(p):
            p_data = p // inner
            if batch % p_data:
                continue  # every strategy here needs whole samples per data-parallel replica
            if inner == 1:
                if "data" in strategies:
                    yield ("data", "data" if p > 1 else "serial", p, p, 1, None)
                    for sharding in sharding_choices(p, devices_per_node):  # ZeRO 1-2, FSDP, HSDP
                        yield ("data", "data", p, p, 1, sharding)
                continue
            prefix = "data+" if p_data > 1 else ""
            if "filter" in strategies:
                yield ("filter", prefix + "filter", p, p_data, inner, None)
            if "channel" in strategies:
                yield ("channel", prefix + "channel", p, p_data, inner, None)
            if tensor_widths and tensor_widths % inner == 0:
                yield ("tensor", prefix + "tensor", p, p_data, inner, None)
            if (want_spatial or want_mix) and nd >= 1:  # a (features,) input has no spatial dim to split
                if grouped:
                    yield ("spatial-group", prefix + "spatial", p, p_data, inner, factorizations(inner, nd),
                           want_spatial, want_mix)
                else:
                    for split in factorizations(inner, nd):
                        if want_spatial:
                            yield ("spatial", prefix + "spatial", p, p_data, inner, split)
                        if want_mix:
                            yield ("spatial", "spatial-then-data", p, p_data, inner, split)
            if "pipeline" in strategies and inner <= len(graph.layers):
                for s in divisors(batch // p_data):
                    yield ("pipeline", prefix + "pipeline", p, p_data, inner, s)
            if widths_3d:
                for t in divisors(inner):
                    stages = inner // t
                    # K = 1 with T >= 2: Megatron without pipelining (tensor and data parallel, the distributed
                    # optimizer, sequence parallelism, recomputation, gradient accumulation)
                    if (stages >= 2 or t >= 2) and stages <= blocks_3d and widths_3d % t == 0:
                        if grouped:
                            yield ("3d-group", "data+tensor+pipeline", p, p_data, inner, (t, stages))
                            continue
                        for variant in hybrid3d_variants(t, stages, p_data, batch // p_data, layers_3d):
                            yield ("3d", "data+tensor+pipeline", p, p_data, inner, (t, stages) + variant)
        for plan in search_candidates(batch, p, devices_per_node, dtype, optimizer, strategies):
            yield ("addon", replace(plan, **plan_options) if plan_options else plan)


def spec_plan(spec: tuple, base: dict) -> Plan:
    """The Plan of a candidate_specs tuple; base: batch, devices_per_node, dtype, optimizer and the plan options."""
    kind = spec[0]
    if kind == "addon":
        return spec[1]
    _, strategy, p, p_data, inner, extra = spec
    if kind == "data":  # extra: None (DDP) or (ZeRO stage, HSDP shard group) of sharding_choices
        zero, group = extra or (0, 0)
        sharded = {"zero_stage": zero, "shard_group": group} if zero else {}
        return Plan(strategy, devices=p, p_data=p, **base, **sharded)
    if kind == "filter":
        return Plan(strategy, devices=p, p_data=p_data, p_filter=inner, **base)
    if kind == "channel":
        return Plan(strategy, devices=p, p_data=p_data, p_channel=inner, **base)
    if kind == "tensor":
        return Plan(strategy, devices=p, p_data=p_data, p_tensor=inner, **base)
    if kind == "spatial":
        return Plan(strategy, devices=p, p_data=p_data, p_spatial=inner, spatial_split=extra, **base)
    if kind == "3d":
        t, stages, s, v, recompute, sp, zero = extra
        return Plan(strategy, devices=p, p_data=p_data, p_tensor=t, stages=stages, micro_batches=s,
                    recompute=recompute != "none", recompute_granularity="selective" if recompute == "selective"
                    else "full", sequence_parallel=sp, zero_stage=zero, schedule="interleaved" if v > 1 else "1f1b",
                    virtual_stages=v, **base)
    return Plan(strategy, devices=p, p_data=p_data, stages=inner, micro_batches=extra, **base)


def candidates(graph: ModelGraph, batch: int, devices: range, devices_per_node: int, dtype: str,
               optimizer: str, strategies=SEARCH_STRATEGIES, plan_options: dict | None = None) -> Iterator[Plan]:
    """Every plan the search considers, in its order: for each device count P, each divisor `inner` of P that
    leaves whole samples per replica: data (inner = 1; DDP, then each of `sharding_choices`);
    filter, channel, tensor (inner dividing its widths), spatial and spatial-then-data over every factorisation of
    inner, pipeline over every micro-batch count, data+tensor+pipeline over every T · K = inner and its
    `hybrid3d_variants` (transformers); then the add-on families."""
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer, **(plan_options or {}))
    for spec in candidate_specs(graph, batch, devices, devices_per_node, dtype, optimizer, strategies,
                                plan_options=plan_options):
        yield spec_plan(spec, base)


class Ranking:
    """The `top` best fitting predictions by objective score and the fastest one per strategy, fed in the
    candidates' order (`add(index, pred)`); ties go to the plan fed first (lower index)."""

    def __init__(self, objective: str, batch: int, top: int):
        self.objective, self.batch, self.top = objective, batch, top
        self.heap: list[tuple[float, int, Prediction]] = []
        self.best_by_strategy: dict[str, Prediction] = {}

    def score(self, pred: Prediction) -> float:
        return pred.iteration_s if self.objective == "time" else pred.plan.devices * pred.iteration_s / self.batch

    def add(self, index: int, pred: Prediction) -> None:
        name = pred.plan.strategy
        if name not in self.best_by_strategy or pred.iteration_s < self.best_by_strategy[name].iteration_s:
            self.best_by_strategy[name] = pred
        item = (-self.score(pred), index, pred)
        if len(self.heap) < self.top:
            heapq.heappush(self.heap, item)
        elif item[0] > self.heap[0][0]:
            heapq.heapreplace(self.heap, item)

    def best(self) -> list[Prediction]:
        return [item[2] for item in sorted(self.heap, key=lambda it: (-it[0], it[1]))]
