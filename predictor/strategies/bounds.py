"""Lower bounds on a candidate's iteration time and memory, for the search (predictor.search_fast; docs/method.md §22).

Each strategy module offers `lower_bound(b, strategy, p, p_data, inner, knob)` beside `evaluate(ctx, plan, pred)`,
made of the helpers its evaluation uses, and the registry lists both (predictor.strategies.registry). knob is the
candidate's own setting: the split (spatial), the micro-batches (pipeline), (T, K, S, v, recomputation, sequence
parallelism, ZeRO stage) (data+tensor+pipeline), the Plan (add-ons), else None. A bound is None when the strategy's
own checks refuse the plan, else (time_s, memory_bytes, refinement): terms of the evaluation, every term left out
>= 0 (time only where `Bounds.timed`, else 0); refinement None or (name, *args), `refine(b, refinement)` ->
(extra_s, extra_bytes, refinement) a tighter bound at more cost (REFINEMENTS[name] makes it: the tuple holds no
function, so the garbage collector stops tracking the thousands the search keeps).
"""
from __future__ import annotations

from itertools import accumulate
from typing import Callable

from predictor.layercost import ACT_BYTES, Split
from predictor.memory import parameter_bytes
from predictor.plan import Plan
from predictor.strategies.context import Context

MARGIN = 1e-9  # relative slack of every bound against rounding (sums taken in another order)
LOW = 1.0 - MARGIN
#: refinement name -> fn(b, refinement) (module docstring); the strategy modules register theirs (`refinement`)
REFINEMENTS: dict[str, Callable] = {}


def refinement(name: str):
    """Register a refinement under `name` (a decorator)."""
    def register(fn):
        REFINEMENTS[name] = fn
        return fn
    return register


def refine(b: "Bounds", found: tuple) -> tuple:
    """(extra_s, extra_bytes, the next refinement or None) of a refinement (module docstring)."""
    return REFINEMENTS[found[0]](b, found)


class Bounds:
    """What the bounds of the candidates evaluated on one Context share: that context, the Plan fields every
    candidate has (`plan`: batch, devices per node, dtype, optimizer, framework, ...), the memory cap, whether the
    cost model's times are >= 0 (`timed`; else only memory bounds), and the bounds' caches (`memo`)."""

    def __init__(self, ctx: Context, plan: Plan, cap: float, timed: bool):
        self.ctx, self.plan, self.cap, self.timed = ctx, plan, cap, timed
        self.batch, self.dpn, self.dtype, self.optimizer = plan.batch, plan.devices_per_node, plan.dtype, plan.optimizer
        self.act = ACT_BYTES[plan.dtype]
        self.coster = ctx.coster(plan.dtype)
        self.memo: dict = {}
        #: the whole model's parameter state (`parameter_state`)
        self.model_state = self.parameter_state(ctx.total_params)
        overheads = [self.coster.overhead(i) for i in range(ctx.n_layers)]
        #: per layer the framework overheads its times include at any split (LayerCoster.overhead), and prefix sums
        self.ohf, self.ohb = [f for f, _ in overheads], [b for _, b in overheads]
        self.ohf_prefix, self.ohb_prefix = [0.0, *accumulate(self.ohf)], [0.0, *accumulate(self.ohb)]

    def cached(self, key, compute):
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = compute()
        return hit

    def table(self, name: str) -> dict:
        """A cache of its own for `name` (keyed by a number: no key tuples kept)."""
        found = self.memo.get(name)
        if found is None:
            found = self.memo[name] = {}
        return found

    def over_cap(self, memory: float) -> bool:
        """Whether a memory bound proves a plan over the cap (its time bound then need not be made)."""
        return memory * LOW > self.cap

    def parameter_state(self, params: float) -> float:
        """Weights, gradients and optimizer state of `params` parameters (memory.parameter_bytes, summed)."""
        plan = self.plan
        return sum(parameter_bytes(params, plan.dtype, plan.optimizer, plan.mixed_precision))

    def layer_times(self, m: int) -> list[tuple[float, float]]:
        """Every layer's (forward, backward) at m samples, unsplit (LayerCoster.times)."""
        key = ("layer-times", m)
        hit = self.memo.get(key)
        if hit is None:
            split = Split(m)
            hit = self.memo[key] = [self.coster.times(i, split) for i in range(self.ctx.n_layers)]
        return hit

    def layer_sums(self, m: int) -> tuple[float, float, float, float]:
        """(sum forward, sum backward, slowest forward, slowest backward) over the layers at m samples, unsplit."""
        key = ("layer-sums", m)
        hit = self.memo.get(key)
        if hit is None:
            times = self.layer_times(m)
            hit = self.memo[key] = (sum(f for f, _ in times), sum(b for _, b in times),
                                    max((f for f, _ in times), default=0.0), max((b for _, b in times), default=0.0))
        return hit

    def gradient(self, key, param_div, group: int, nodes: int, share: float = 1.0) -> tuple[float, float]:
        """(the least time backward and every layer's gradient exchange of `Context.gradient_sync` end at together,
        the gradient copies it adds: Context.gradient_floor), cached under `key`, which must identify param_div."""
        full = ("gradient", key, group, nodes, share)
        hit = self.memo.get(full)
        if hit is None:
            hit = self.memo[full] = self.ctx.gradient_floor(range(self.ctx.n_layers), param_div, group, nodes,
                                                            self.plan, share=share)
        return hit
