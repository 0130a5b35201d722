"""Glue between predictor records and calibrate's residual correction (calibrate/correction.py).

The same record feeds training and use, so the features match: `predictor validate` writes each run as
`prediction_record(...)` plus `measured_time_s`, `model`, `scenario`; `predictor run` applies the
profile's correction to `prediction_record(...)` of each prediction and shows both figures.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Sequence

from calibrate.correction import CorrectedTime, Correction, load_correction
from calibrate.correction_features import record_from_prediction
from predictor.block_costs import WEIGHT_OPS
from predictor.graph import ModelGraph, dtype_bytes
from predictor.plan import Plan, Prediction
from profiler.profile import Profile


def model_summary(graph: ModelGraph, dtype: str) -> dict[str, float]:
    """Model-shape features: layer count, FLOPs per sample (fwd + bwd), parameter bytes."""
    return {"layers": len(graph.layers), "flops_per_sample": graph.flops_per_sample,
            "param_bytes": graph.params * dtype_bytes(dtype)}


def collective_calls(plan: Plan, graph: ModelGraph) -> int:
    """Communication calls one device makes per iteration, estimated from the plan's structure (a feature
    for per-call overheads the analytical model leaves out, not a cost): one gradient all-reduce per DDP
    bucket; per spatially split layer with a kernel, one halo exchange forward and one backward; per
    filter/channel-split weight layer, one collective forward and one backward; per pipeline micro-batch,
    one send or receive forward and one backward."""
    weight_layers = sum(1 for layer in graph.layers if layer.op in WEIGHT_OPS)
    calls = 0
    if plan.p_data > 1:
        param_bytes = graph.params * dtype_bytes(plan.dtype)
        calls += max(1, math.ceil(param_bytes / plan.bucket_bytes))
    if plan.p_spatial > 1:
        calls += 2 * sum(1 for layer in graph.layers if any(k > 1 for k in layer.kernel))
    if plan.p_filter > 1 or plan.p_channel > 1:
        calls += 2 * weight_layers
    if plan.stages > 1:
        calls += 2 * plan.micro_batches
    return calls


def prediction_record(prediction: Prediction, graph: ModelGraph, **context: Any) -> dict[str, Any]:
    """The correction's feature record of one prediction. context: threads, scenario, measured_time_s,
    halo_bytes, ... (calibrate/correction_features.py); collective_calls, flops_per_device and
    model_summary default to estimates from the plan and graph, halo_bytes to details["halo_bytes"]."""
    plan = prediction.plan
    context.setdefault("model", graph.name)
    context.setdefault("model_summary", model_summary(graph, plan.dtype))
    context.setdefault("collective_calls", collective_calls(plan, graph))
    context.setdefault("flops_per_device", graph.flops_per_sample * plan.batch / plan.devices)
    context.setdefault("halo_bytes", prediction.details.get("halo_bytes"))
    return record_from_prediction(prediction.to_dict(), **context)


def corrected_times(predictions: Sequence[Prediction], graph: ModelGraph, profile: Profile,
                    profile_path: Optional[Path | str] = None, **context: Any) -> Optional[list[Optional[CorrectedTime]]]:
    """The corrected figure of each prediction (None for an infeasible one), or None when the profile has
    no correction. Raises UserError when the profile's correction is refused (see load_correction)."""
    correction: Optional[Correction] = load_correction(profile, profile_path)
    if correction is None:
        return None
    return [correction.apply(prediction_record(p, graph, **context))
            if p.feasible and math.isfinite(p.iteration_s) and p.iteration_s > 0 else None
            for p in predictions]
