"""`predictor search` over Megatron-Core's expert- and context-parallel layouts (docs/method.md §22, §14b): every
data+tensor+pipeline layout of P = T x CP x K x data devices with an expert degree EP dividing both the experts and
the data x context ranks (expert tensor degree T, Megatron-Core's default), or, with T > 1, the tensor x data x
context ranks at expert tensor degree 1 (the expert ranks folded over the tensor ranks), each with search_space.hybrid3d_variants (micro-batches, interleaving, recomputation,
sequence parallelism, ZeRO-1), evaluated one by one (the fast walk's bounds assume CP = EP = 1). Within one layout
and setting a recomputation is tried only while the cheaper one does not fit: it adds time and only saves memory."""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from predictor.plan import Plan
from predictor.search_space import (RECOMPUTE_CHOICES, Counts, Ranking, divisors, hybrid3d_schedules,
                                    megatron_3d_shape, megatron_layers)
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from predictor.strategies.moe_context import moe_layers

STRATEGY = "data+tensor+pipeline"


def expert_count(ctx: Context) -> int:
    """The experts of a mixture-of-experts graph (0 for a dense one)."""
    dispatch, _, _ = moe_layers(ctx)
    return ctx.layers[dispatch[0]].groups if dispatch else 0


def layouts(ctx: Context, batch: int, devices: Iterable[int], dpn: int, context: Iterable[int],
            experts: Iterable[int] | None, expert_tensor: int | None = None
            ) -> Iterable[tuple[int, int, int, int, int, int, int]]:
    """(P, t, cp, K, p_data, ep, etp) in the search's order: t a tensor degree inside a node that the model splits
    into, K at most the transformer layers, ep (every divisor of the experts above 1 unless `experts` names them) and
    the expert tensor degree etp (t, and 1 where t > 1, unless `expert_tensor` names one: 0 = t) with ep x etp dividing
    the tensor x data x context ranks."""
    width, blocks = megatron_3d_shape(ctx.graph)
    n_experts = expert_count(ctx)
    if not width:
        return
    for p in devices:
        for cp in context:
            if p % cp:
                continue
            for t in divisors(p // cp):
                if t > dpn or width % t:
                    continue
                for K in divisors(p // (cp * t)):
                    p_data = p // (cp * t * K)
                    if K > max(blocks, 1) or batch % p_data:
                        continue
                    eps = experts if experts is not None else [e for e in divisors(n_experts) if e > 1] or [1]
                    for ep in eps:
                        if not (cp > 1 or ep > 1):
                            continue
                        etps = (t, 1) if expert_tensor is None and t > 1 and ep > 1 else (expert_tensor or t,)
                        for etp in etps:
                            if t % etp == 0 and (t * p_data * cp) % (ep * etp) == 0:
                                yield p, t, cp, K, p_data, ep, etp


def walk(ctx: Context, ranking: Ranking, counts: Counts, *, batch: int, devices: range, devices_per_node: int,
         dtype: str, optimizer: str, cap: float, plan_options: dict, context: Iterable[int],
         experts: Iterable[int] | None, first_index: int = 0, expert_tensor: int | None = None) -> int:
    """Evaluate every candidate (module docstring) into `ranking` and `counts`, indices from first_index on; the
    next free index."""
    layers = megatron_layers(ctx.graph)
    index = first_index
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer, **plan_options)
    for p, t, cp, K, p_data, ep, etp in layouts(ctx, batch, devices, devices_per_node, tuple(context), experts,
                                                expert_tensor):
        layout = Plan(STRATEGY, devices=p, p_data=p_data, p_tensor=t, stages=K, p_context=cp, p_expert=ep,
                      p_expert_tensor=etp if etp != t else 0, schedule="1f1b", **base)
        for s, vs in hybrid3d_schedules(K, batch // p_data, layers):
            for v in (vs if K > 1 else (1,)):
                for sp in ((False, True) if t > 1 and ep == 1 else (t > 1,)):
                    for zero in ((0, 1) if p_data * cp > 1 else (0,)):
                        for recompute in RECOMPUTE_CHOICES:
                            plan = replace(layout, micro_batches=s, sequence_parallel=sp, zero_stage=zero,
                                           schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
                                           recompute=recompute != "none",
                                           recompute_granularity="selective" if recompute == "selective" else "full")
                            pred = evaluate(ctx, plan, cap)
                            fits = counts.tally(pred)
                            if fits:
                                ranking.add(index, pred)
                            index += 1
                            if fits or not pred.feasible:  # more recomputation: slower, and this one fits
                                break
    return index
