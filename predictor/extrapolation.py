"""How much of a plan's predicted compute comes from calls outside the profile's calibrated domain.

    extrapolated_share = T_out / T_all

T_all: the plan's compute (forward, backward and recomputation) with every compute call at its predicted time
and nothing else (no framework overhead, memory-bound copies, collectives or updates); T_out: the same with
only the calls that lie outside the calibrated domain of their family (calibrate.domain: beyond the grid's
range in some feature, or farther than a factor of calibrate.domain.NEAR_FACTOR from every measured shape).
Both go through the strategy's own evaluation, so a call counts as often as the plan runs it. None when the
profile records no measured domain (a published profile).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Optional, Sequence

from calibrate.cost_api import CostModel
from predictor.graph import ModelGraph
from predictor.plan import Plan, Prediction
from predictor.strategies import evaluate
from predictor.strategies.context import Context

#: a strategy is flagged in `predictor run` when more than this share of its compute is extrapolated
FLAG_SHARE = 0.10


@dataclass
class _ComputeOnly:
    """A CostModel that keeps only compute calls (all of them, or only those outside the domain)."""

    cm: CostModel
    only_outside: bool
    unknown: bool = False  # a call's family records no domain
    outside: set = field(default_factory=set)  # (op, pass, params) of the calls outside

    def __getattr__(self, name):
        return getattr(self.cm, name)

    def compute_time_s(self, op, pass_, params, dtype):
        t = self.cm.compute_time_s(op, pass_, params, dtype)
        if not self.only_outside:
            return t
        inside = self.cm.compute_in_domain(op, pass_, params, dtype)
        if inside is None:
            self.unknown = True
        if inside is False:
            self.outside.add((op, pass_, tuple(sorted(params.items()))))
            return t
        return 0.0

    def framework_overhead_s(self, pass_):
        return 0.0

    def optimizer_overhead_s(self, tensors):
        return 0.0

    def memory_time_s(self, bytes_moved, *, where="device"):
        return 0.0

    def collective_time_s(self, op, size_bytes, group_size, nodes=1):
        return 0.0

    def host_device_time_s(self, size_bytes, direction="h2d", pinned=True):
        return 0.0

    def input_time_s(self, samples):
        return 0.0


def _compute_s(pred: Prediction) -> float:
    return pred.compute_fwd_s + pred.compute_bwd_s + pred.recompute_s


@dataclass(frozen=True)
class Extrapolation:
    """share: T_out / T_all (module docstring); calls: distinct (op, pass, params) outside the domain."""

    share: float
    calls: int


def extrapolations(graph: ModelGraph, plans: Sequence[Plan], cost_model: CostModel) -> list[Optional[Extrapolation]]:
    """The extrapolated share of each plan's compute on `cost_model` (None: the profile records no measured
    domain, or the plan computes nothing). One context per view, so plans share their per-layer costs."""
    everything = Context(graph, _ComputeOnly(cost_model, only_outside=False))
    out = []
    for plan in plans:
        masked = _ComputeOnly(cost_model, only_outside=True)
        part = _compute_s(evaluate(Context(graph, masked), plan))
        if masked.unknown:  # no measured domain (a published profile, whose fits all lack one)
            return [None] * len(plans)
        total = _compute_s(evaluate(everything, plan))
        out.append(Extrapolation(share=min(1.0, part / total), calls=len(masked.outside)) if total > 0 else None)
    return out


def measure_command(model: str, model_args: Sequence[str], batch: int, gpus: int, strategy: str,
                    device_is_host: bool) -> str:
    """The one command that measures a model's own calls next to the grid (profiler calibrate --model)."""
    knobs = "".join(f" --model-arg {shlex.quote(a)}" for a in model_args)
    return (f"profiler calibrate --device {'cpu' if device_is_host else 'cuda'} --model {shlex.quote(model)}{knobs} "
            f"--batch {batch} --gpus {gpus} --strategy {strategy} --out PROFILE.yaml")
