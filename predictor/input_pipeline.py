"""The host input pipeline of a training step: decoding and augmenting the samples every device consumes.

Loader workers run on the node's CPU cores alongside the devices, one iteration ahead, so the input costs the
step only what the device's own work does not cover:

    host_s  = CostModel.input_time_s(samples the node's devices take per iteration)
    input_s = max(0, host_s - device_s),  device_s = compute + update + exposed communication + bubble + ...

A node holding k data-parallel replicas (devices_per_node / inner, at least 1) loads k * batch / p_data
samples per iteration. With synthetic data (Plan.synthetic_data) there is no host work. The per-sample
core-seconds come from `profiler calibrate`'s input section (profiler.bench_input).
"""
from __future__ import annotations

from predictor.plan import Plan, Prediction


def samples_per_node(plan: Plan) -> float:
    replicas_on_node = max(1, min(plan.devices, plan.devices_per_node) // max(plan.inner, 1))
    return replicas_on_node * plan.batch / plan.p_data


def exposed_input_s(cost_model, plan: Plan, pred: Prediction) -> float:
    """input_s of the module docstring (0 with synthetic data or without an input coefficient)."""
    if plan.synthetic_data:
        return 0.0
    host_s = cost_model.input_time_s(samples_per_node(plan))
    if host_s <= 0.0:
        return 0.0
    device_s = (pred.compute_fwd_s + pred.compute_bwd_s + pred.update_s + pred.comm_exposed_total_s + pred.bubble_s
                + pred.swap_s + pred.recompute_s)
    pred.details["input_host_s"] = host_s
    return max(0.0, host_s - device_s)
