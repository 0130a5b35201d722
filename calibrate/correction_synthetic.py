"""Synthetic measured runs with a known residual, for the correction's tests and `bench/bench_correction.py
--synthetic`: the "measured" time is the analytical time plus a fixed overhead per collective call (the
kind of framework cost the analytical model leaves out), times small log-normal noise. Not a measurement;
nothing here is reported as accuracy on real runs."""
from __future__ import annotations

import math

import numpy as np

STRATEGIES = ("data", "spatial", "filter", "channel", "pipeline")


def synthetic_runs(*, models: int = 6, overhead_per_call_s: float = 50e-6, noise: float = 0.01,
                   seed: int = 0, model_prefix: str = "net") -> list[dict]:
    """Runs of `models` synthetic CNNs x 5 strategies x devices {2, 4, 8} x two batch sizes.

    Each run's record (calibrate/correction_features.py fields) has `true_overhead_s` =
    overhead_per_call_s * collective_calls, so a test can check what a correction recovers."""
    rng = np.random.default_rng(seed)
    runs = []
    for m in range(models):
        layers = int(rng.integers(8, 60))
        flops_per_sample = float(rng.uniform(0.5e9, 8e9))
        param_bytes = float(rng.uniform(5e6, 200e6))
        model = f"{model_prefix}{m}"
        for devices in (2, 4, 8):
            for batch in (16, 64):
                scenario = f"{model}/d{devices}/b{batch}"
                for strategy in STRATEGIES:
                    runs.append(_run(rng, model, scenario, strategy, devices, batch, layers, flops_per_sample,
                                     param_bytes, overhead_per_call_s, noise))
    return runs


def _run(rng, model, scenario, strategy, devices, batch, layers, flops_per_sample, param_bytes,
         overhead_per_call_s, noise) -> dict:
    rate_flops_per_s = 2e11
    bandwidth_bytes_per_s = 5e9
    flops_per_device = 3 * flops_per_sample * batch / devices
    compute_s = flops_per_device / rate_flops_per_s
    terms = {"compute_fwd_s": compute_s / 3, "compute_bwd_s": 2 * compute_s / 3,
             "update_s": 3 * param_bytes / 5e10}
    plan = {"p_data": 1, "p_spatial": 1, "p_filter": 1, "p_channel": 1, "stages": 1, "micro_batches": 1}
    halo_bytes = 0.0
    batch_per_device = batch
    activation_bytes = 4 * flops_per_sample / 500  # a crude per-sample activation size
    if strategy == "data":
        plan["p_data"] = devices
        batch_per_device = batch / devices
        buckets = max(1, math.ceil(param_bytes / 25e6))
        calls = buckets
        terms["comm_gradient_s"] = 2 * (devices - 1) / devices * param_bytes / bandwidth_bytes_per_s
    elif strategy == "spatial":
        plan["p_spatial"] = devices
        calls = 2 * layers + 1
        halo_bytes = 2 * 0.05 * activation_bytes * batch
        terms["comm_halo_s"] = halo_bytes / bandwidth_bytes_per_s
        terms["comm_gradient_s"] = 2 * (devices - 1) / devices * param_bytes / bandwidth_bytes_per_s
    elif strategy in ("filter", "channel"):
        plan["p_" + strategy] = devices
        calls = 2 * layers
        terms["comm_layer_collective_s"] = 0.3 * activation_bytes * batch * (devices - 1) / devices / bandwidth_bytes_per_s
    else:
        micro = 4
        plan["stages"], plan["micro_batches"] = devices, micro
        calls = 2 * micro * (devices - 1)
        terms["comm_pipeline_p2p_s"] = 0.02 * activation_bytes * batch / bandwidth_bytes_per_s
        terms["bubble_s"] = (devices - 1) / micro * compute_s
    predicted_s = sum(terms.values())
    true_overhead_s = overhead_per_call_s * calls
    measured_s = (predicted_s + true_overhead_s) * math.exp(rng.normal(0.0, noise))
    return {
        "model": model, "scenario": scenario, "strategy": strategy,
        "model_summary": {"layers": layers, "flops_per_sample": flops_per_sample, "param_bytes": param_bytes},
        "plan": plan, "devices": devices, "devices_per_node": devices, "nodes": 1,
        "batch_per_device": batch_per_device, "dtype": "fp32", "threads": 1,
        "terms": terms, "predicted_time_s": predicted_s, "measured_time_s": measured_s,
        "halo_bytes": halo_bytes, "flops_per_device": flops_per_device, "collective_calls": calls,
        "true_overhead_s": true_overhead_s,
    }
