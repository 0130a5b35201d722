"""Feature engineering for the residual correction: one measured-run record -> a fixed numeric vector.

A *record* is a plain mapping (one JSON line of `predictor validate --out runs.jsonl`, or the same fields built
by `predictor run` from a Prediction); calibrate never imports predictor, so this module works on plain mappings
only. Its fields (strategy, predicted_time_s, terms and measured_time_s required; the rest optional, counted at
their neutral value when absent so that an older writer's record still yields a vector) are listed in
docs/validation.md ("Residual correction", record fields). Target: log(measured_time_s / predicted_time_s), the
multiplicative residual of the analytical model.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from profiler.dtypes import DTYPE_ALIASES, DTYPE_BYTES, dtype_bytes

# Term groups, matched by keyword in a term's name, in this order (first match wins). The communication
# groups follow predictor/plan.py's COMM_KINDS (gradient, layer_collective, halo, pipeline_p2p,
# redistribute) and also accept collective names (allreduce, allgather, ...).
TERM_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hidden", ("hidden",)),
    ("bubble", ("bubble",)),
    ("update", ("update", "optimizer")),
    ("swap", ("swap", "offload", "h2d", "d2h", "host_device")),
    ("halo", ("halo", "sendrecv", "send_recv")),
    ("pipeline_p2p", ("pipeline", "p2p")),
    ("redistribute", ("redistribute", "alltoall", "all_to_all")),
    ("layer_collective", ("layer_collective", "allgather", "all_gather", "reduce_scatter", "broadcast")),
    ("gradient", ("gradient", "allreduce", "all_reduce")),
    ("compute", ("compute", "fwd", "bwd", "recompute", "loss")),
)
COMM_GROUPS = ("gradient", "layer_collective", "halo", "pipeline_p2p", "redistribute")
PLAN_DEGREES = ("p_data", "p_spatial", "p_filter", "p_channel", "stages", "micro_batches")


#: numeric features, in vector order (strategy indicators are appended per correction, see feature_vector)
NUMERIC_FEATURES: tuple[str, ...] = (
    "log_predicted_s",
    *(f"frac_{g}" for g, _ in TERM_GROUPS),
    "frac_other",
    "comm_over_compute",
    "log2_devices",
    "devices_per_used_node",
    "nodes",
    *(f"log2_{d}" for d in PLAN_DEGREES),
    "log2_batch_per_device",
    "dtype_bytes",
    "log2_threads",
    "cpu_oversubscription",
    "halo_bytes_per_flop",
    "collective_calls_per_s",
    "layers_per_s",
    "spatial_dims",
    "log_layers",
    "log_flops_per_sample",
    "log_param_bytes",
)


def term_group(name: str) -> str:
    """The group a term name belongs to (see TERM_GROUPS), or "other"."""
    lowered = name.lower()
    for group, keywords in TERM_GROUPS:
        if any(k in lowered for k in keywords):
            return group
    return "other"


def _number(record: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = record.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"field '{where}{key}' must be a finite number, got {value!r}")
    return float(value)


def _positive(record: Mapping[str, Any], key: str, default: float, where: str = "") -> float:
    if default <= 0 and record.get(key) is None:
        raise ValueError(f"field '{where}{key}' is missing")
    value = _number(record, key, default, where)
    if value <= 0:
        raise ValueError(f"field '{where}{key}' must be > 0, got {value!r}")
    return value


def _mapping(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key) or {}
    if not isinstance(value, Mapping):
        raise ValueError(f"field '{key}' must be a mapping, got {type(value).__name__}")
    return value


def _spatial_dims(summary: Mapping[str, Any]) -> float:
    """2 for (C, H, W) inputs, 3 for (C, D, H, W); 0 when model_summary.input_shape is absent."""
    shape = summary.get("input_shape")
    if shape is None:
        return 0.0
    if not isinstance(shape, (list, tuple)) or not shape:
        raise ValueError("field 'model_summary.input_shape' must be a non-empty list")
    return float(len(shape) - 1)


def strategy_of(record: Mapping[str, Any]) -> str:
    strategy = record.get("strategy")
    if not isinstance(strategy, str) or not strategy:
        raise ValueError("field 'strategy' must be a non-empty string")
    return strategy


#: the most a correction may scale a prediction by, either way: it learns residuals (the trained ones stay within
#: 2.4x); a run measured a million times off its prediction is not one, and exp of an unbounded model overflows
MAX_CORRECTION_FACTOR = 1e6


def log_residual(record: Mapping[str, Any]) -> float:
    """The regression target: log(measured_time_s / predicted_time_s), within MAX_CORRECTION_FACTOR either way."""
    ratio = _positive(record, "measured_time_s", 0.0) / _positive(record, "predicted_time_s", 0.0)
    if not 1 / MAX_CORRECTION_FACTOR <= ratio <= MAX_CORRECTION_FACTOR:
        raise ValueError(f"fields 'measured_time_s' / 'predicted_time_s' = {ratio:.3g}: a run more than "
                         f"{MAX_CORRECTION_FACTOR:g}x off its prediction is no residual to correct")
    return math.log(ratio)


def numeric_features(record: Mapping[str, Any]) -> dict[str, float]:
    """The NUMERIC_FEATURES of one record. Raises ValueError naming the bad field."""
    predicted_s = _positive(record, "predicted_time_s", 0.0)
    terms = _mapping(record, "terms")
    group_s = {g: 0.0 for g, _ in TERM_GROUPS} | {"other": 0.0}
    for name, seconds in terms.items():
        value = _number(terms, name, 0.0, "terms.")
        if value < -1e-9 * predicted_s:  # tolerate rounding residue such as -1e-19
            raise ValueError(f"field 'terms.{name}' must be >= 0, got {value!r}")
        group_s[term_group(str(name))] += max(value, 0.0)
    comm_s = sum(group_s[g] for g in COMM_GROUPS)
    plan = _mapping(record, "plan")
    summary = _mapping(record, "model_summary")
    dtype = record.get("dtype", "float32")
    try:
        element_bytes = dtype_bytes(dtype)
    except ValueError:
        raise ValueError(f"field 'dtype' is {dtype!r}; known: {', '.join([*DTYPE_BYTES, *DTYPE_ALIASES])}") from None
    devices = _positive(record, "devices", 1)
    nodes = _positive(record, "nodes", 1)
    p_data = _positive(plan, "p_data", 1, "plan.")
    batch_per_device = _positive(record, "batch_per_device", 1)
    threads = _positive(record, "threads", 1)
    cpu_count = _number(record, "cpu_count", 0.0, "")
    flops_per_sample = _number(summary, "flops_per_sample", 0.0, "model_summary.")
    flops_per_device = _number(record, "flops_per_device", flops_per_sample * batch_per_device * p_data / devices, "")
    halo_bytes = _number(record, "halo_bytes", 0.0, "")
    calls = record.get("collective_calls")
    calls = estimated_collective_calls(record) if calls is None else _number(record, "collective_calls", 0.0, "")
    features = {
        "log_predicted_s": math.log(predicted_s),
        **{f"frac_{g}": group_s[g] / predicted_s for g in group_s},
        "comm_over_compute": comm_s / group_s["compute"] if group_s["compute"] > 0 else 0.0,
        "log2_devices": math.log2(devices),
        "devices_per_used_node": devices / nodes,  # the layout that ran, not the node's capacity
        "nodes": nodes,
        **{f"log2_{d}": math.log2(_positive(plan, d, 1, "plan.")) for d in PLAN_DEGREES},
        "log2_batch_per_device": math.log2(batch_per_device),
        "dtype_bytes": float(element_bytes),
        "log2_threads": math.log2(threads),
        "cpu_oversubscription": devices * threads / cpu_count if cpu_count > 0 else 0.0,
        "halo_bytes_per_flop": halo_bytes / flops_per_device if flops_per_device > 0 else 0.0,
        "collective_calls_per_s": calls / predicted_s,
        "layers_per_s": _number(summary, "layers", 0.0, "model_summary.") / predicted_s,
        "spatial_dims": _spatial_dims(summary),
        "log_layers": math.log1p(_number(summary, "layers", 0.0, "model_summary.")),
        "log_flops_per_sample": math.log1p(flops_per_sample),
        "log_param_bytes": math.log1p(_number(summary, "param_bytes", 0.0, "model_summary.")),
    }
    return {name: features[name] for name in NUMERIC_FEATURES}


def estimated_collective_calls(record: Mapping[str, Any]) -> float:
    """Communication calls one device makes per iteration, estimated from the plan degrees and the model
    summary alone (so runs files and live predictions give the same figure): one gradient all-reduce per
    DDP bucket (param_bytes / bucket_bytes, default 25 MB, as DDP); per layer of a spatially,
    filter- or channel-split model, one exchange forward and one backward; per pipeline micro-batch, one
    send/receive forward and one backward. A feature for per-call overheads the analytical model leaves
    out, not a cost."""
    plan = _mapping(record, "plan")
    summary = _mapping(record, "model_summary")
    layers = _number(summary, "layers", 0.0, "model_summary.")
    calls = 0.0
    if _positive(plan, "p_data", 1, "plan.") > 1:
        param_bytes = _number(summary, "param_bytes", 0.0, "model_summary.")
        calls += max(1.0, math.ceil(param_bytes / _positive(plan, "bucket_bytes", 25e6, "plan.")))
    if any(_positive(plan, d, 1, "plan.") > 1 for d in ("p_spatial", "p_filter", "p_channel")):
        calls += 2 * layers
    if _positive(plan, "stages", 1, "plan.") > 1:
        calls += 2 * _positive(plan, "micro_batches", 1, "plan.")
    return calls


def feature_names(strategies: tuple[str, ...]) -> tuple[str, ...]:
    """Full vector layout: the numeric features, then one 0/1 indicator per strategy seen in training."""
    return NUMERIC_FEATURES + tuple(f"strategy={s}" for s in strategies)


def feature_vector(record: Mapping[str, Any], strategies: tuple[str, ...]) -> list[float]:
    """The record as a vector in feature_names(strategies) order (an unseen strategy has all indicators 0)."""
    numeric = numeric_features(record)
    strategy = strategy_of(record)
    return [numeric[n] for n in NUMERIC_FEATURES] + [1.0 if strategy == s else 0.0 for s in strategies]


def record_from_prediction(prediction: Mapping[str, Any], **context: Any) -> dict[str, Any]:
    """A feature record from `Prediction.to_dict()` (predictor/plan.py) plus context fields the
    prediction does not hold (model, scenario, model_summary, threads, halo_bytes, collective_calls,
    flops_per_device, measured_time_s). Plain mappings only: calibrate never imports predictor."""
    plan = prediction["plan"]
    devices = int(plan["devices"])
    per_node = int(plan.get("devices_per_node") or devices)
    terms = {k: float(prediction.get(k, 0.0)) for k in
             ("compute_fwd_s", "compute_bwd_s", "recompute_s", "update_s", "bubble_s", "swap_s")}
    terms |= {f"comm_{kind}_s": float(t) for kind, t in (prediction.get("comm_exposed_s") or {}).items()}
    terms |= {f"hidden_{kind}_s": float(t) for kind, t in (prediction.get("comm_hidden_s") or {}).items()}
    record = {
        "strategy": plan["strategy"],
        "predicted_time_s": float(prediction["iteration_s"]),
        "terms": terms,
        "plan": {d: int(plan.get(d, 1)) for d in PLAN_DEGREES} | {"bucket_bytes": float(plan.get("bucket_bytes", 25e6))},
        "devices": devices,
        "devices_per_node": per_node,
        "nodes": -(-devices // per_node),
        "batch_per_device": float(plan["batch"]) / max(int(plan.get("p_data", 1)), 1),
        "dtype": plan.get("dtype", "fp32"),
    }
    record.update({k: v for k, v in context.items() if v is not None})
    return record
