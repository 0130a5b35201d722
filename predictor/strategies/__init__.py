"""Strategy cost and memory models: one module per strategy, hybrids composed from the same pieces.

`evaluate(ctx, plan)` returns the Prediction terms for any Plan; a plan the strategy cannot run comes
back `feasible=False` with the reason (never an exception). The evaluators are in the registry
(predictor.strategies.registry); add-on strategies (out-of-core, recompute, cooperative) register there and are
loaded when a plan first names one.
"""
from __future__ import annotations

import math
from predictor.at_scale import straggler_s
from predictor.input_pipeline import exposed_input_s
from predictor.plan import CROSS_ENTROPY_IMPLS, HYBRID_3D, MIXED_PRECISIONS, ZERO_STRATEGIES, Plan, Prediction
from predictor.strategies.context import Context, Infeasible
from predictor.strategies.registry import EVALUATORS, Evaluator, register  # noqa: F401 - the registry's API

def _addon(name: str) -> Evaluator | None:
    """An add-on strategy's evaluator: the out-of-core, recompute and cooperative models register themselves
    (predictor.outofcore_strategies) the first time one is asked for, so this registry imports none of them."""
    from predictor import outofcore_strategies  # noqa: F401 - registers on import

    return EVALUATORS.get(name)


#: the strategies whose replicas may reduce batch norm's statistics in groups (Plan.bn_group; data.batch_norm_sync_s)
BN_GROUP_STRATEGIES = ("data",)


def _check_layout(plan: Plan) -> None:
    if plan.batch < 1:
        raise Infeasible(f"batch {plan.batch} < 1")
    for name in ("p_data", "p_spatial", "p_filter", "p_channel", "p_tensor", "stages", "micro_batches", "devices",
                 "p_context", "p_expert"):
        if getattr(plan, name) < 1:
            raise Infeasible(f"{name} {getattr(plan, name)} < 1")
    if plan.p_expert_tensor < 0:
        raise Infeasible(f"p_expert_tensor {plan.p_expert_tensor} < 0")
    if (plan.p_context > 1 or plan.p_expert > 1) and plan.strategy not in HYBRID_3D:
        raise Infeasible(f"context and expert parallelism run in {HYBRID_3D[0]} (Megatron-Core's layout), not "
                         f"{plan.strategy}")
    if plan.p_data * plan.inner != plan.devices:
        raise Infeasible(f"p_data {plan.p_data} x inner {plan.inner} != {plan.devices} devices")
    misfit = plan.bn_group > 1 and (plan.strategy not in BN_GROUP_STRATEGIES or plan.p_data % plan.bn_group)
    if plan.bn_group < 1 or misfit:
        raise Infeasible(f"batch-norm groups of {plan.bn_group} need data parallelism over a multiple of "
                         f"{plan.bn_group} replicas (strategy {plan.strategy}, {plan.p_data} replicas)")
    if plan.shard_group and (plan.zero_stage != 3 or plan.strategy not in ZERO_STRATEGIES or plan.shard_group < 1
                             or plan.p_data % plan.shard_group):
        raise Infeasible(f"shard groups of {plan.shard_group} (HSDP) need ZeRO stage 3 data parallelism over a "
                         f"multiple of {plan.shard_group} replicas (strategy {plan.strategy}, zero {plan.zero_stage}, "
                         f"{plan.p_data} replicas)")
    if plan.cross_entropy not in CROSS_ENTROPY_IMPLS:
        raise Infeasible(f"unknown cross-entropy {plan.cross_entropy!r} (known: {', '.join(CROSS_ENTROPY_IMPLS)})")
    if plan.mixed_precision not in MIXED_PRECISIONS:
        raise Infeasible(f"unknown mixed precision {plan.mixed_precision!r} (known: {', '.join(MIXED_PRECISIONS)})")


def evaluate(ctx: Context, plan: Plan, device_memory_bytes: float | None = None) -> Prediction:
    """Predict one plan on ctx's cost model (no interval; see api.predict)."""
    pred = Prediction(plan=plan)
    pred.device_memory_bytes = ctx.cm.device_memory_bytes if device_memory_bytes is None else device_memory_bytes
    try:
        _check_layout(plan)
        fn = EVALUATORS.get(plan.strategy) or _addon(plan.strategy)
        if fn is None:
            raise Infeasible(f"unknown strategy {plan.strategy!r}")
        fn(ctx.for_plan(plan), plan, pred)
        pred.straggler_s = straggler_s(ctx.cm, plan, pred)
        pred.input_s = exposed_input_s(ctx.cm, plan, pred)
    except Infeasible as why:
        pred.feasible = False
        pred.reason = f"infeasible: {why}"
        return pred.finish()
    pred.finish()
    pred.max_batch_fits = max_batch(pred)
    return pred


def max_batch(pred: Prediction) -> int:
    """Largest global batch that fits, from the batch-proportional memory terms (activations,
    workspace, halo/boundary buffers), rounded down to what the plan's splits need."""
    plan = pred.plan
    fixed = pred.weights_bytes + pred.grads_bytes + pred.optimizer_bytes
    ddp_copy = pred.grads_bytes if pred.comm_hidden_s.get("gradient", 0) + pred.comm_exposed_s.get("gradient", 0) > 0 else 0.0
    fixed += ddp_copy
    per_sample = (pred.memory_bytes - fixed) / plan.batch
    if per_sample <= 0:
        return 0
    unit = plan.p_data * plan.micro_batches * (plan.p_spatial if plan.strategy == "spatial-then-data" else 1)
    room = pred.device_memory_bytes - fixed
    if room <= 0 or math.isinf(room):
        return 0 if room <= 0 else plan.batch
    return int(room // per_sample) // unit * unit

