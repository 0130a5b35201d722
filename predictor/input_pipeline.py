"""The host input pipeline of a training step: reading the samples from storage, decoding and augmenting them.

Loader workers run on the node's CPU cores alongside the devices, one iteration ahead, so the input costs the step
only what the device's own work does not cover: input = max(0, max(host, storage) - device work), host from the
calibration's input section (profiler.bench_input) or, without one, the data source's decode cost per sample over
the node's cores (a published run's loader: DataSource.decode_core_s), storage from calibrate.storage_model, for the
k * batch / p_data samples a node holding k data-parallel replicas loads per iteration; nothing with synthetic data
(Plan.synthetic_data). The bytes and files per sample come from the job's data source
(predictor.at_scale.DataSource). docs/method.md §19 and §19a.
"""
from __future__ import annotations

from predictor.plan import Plan, Prediction


def samples_per_node(plan: Plan) -> float:
    replicas_on_node = max(1, min(plan.devices, plan.devices_per_node) // max(plan.inner, 1))
    return replicas_on_node * plan.batch / plan.p_data


def storage_demand(cost_model, plan: Plan):
    """What one step of `plan` reads (calibrate.storage_model.StorageDemand), from the job's data source."""
    from calibrate.storage_model import StorageDemand
    from predictor.at_scale import data_source, nodes_of

    source = data_source(cost_model)
    return StorageDemand(samples_per_node=samples_per_node(plan), nodes=nodes_of(plan),
                         sample_bytes=source.sample_bytes, files_per_sample=source.files_per_sample,
                         dataset_bytes=source.dataset_bytes, staged=source.staged)


def storage(cost_model, plan: Plan):
    """One step's storage read time at the cost model's bound (a StorageTime; empty without the extra)."""
    fn = getattr(cost_model, "storage_time_s", None)
    if fn is None or plan.synthetic_data:
        from calibrate.storage_model import StorageTime
        return StorageTime()
    return fn(storage_demand(cost_model, plan))


def decode_time_s(cost_model, plan: Plan) -> float:
    """Host seconds a node's cores take to decode and augment one step's samples at the data source's decode cost
    (DataSource.decode_core_s, for a profile without a calibrated input pipeline); 0 when it is not known."""
    from predictor.at_scale import data_source

    per_sample = data_source(cost_model).decode_core_s
    cores = getattr(cost_model, "cpu_cores", None)
    if not per_sample or not cores:
        return 0.0
    return samples_per_node(plan) * per_sample / cores


def exposed_input_s(cost_model, plan: Plan, pred: Prediction) -> float:
    """input_s of the module docstring (0 with synthetic data or without an input coefficient); sets
    pred.storage_s and the details "input_host_s" and "storage" (binding resource, terms, unknown figures)."""
    if plan.synthetic_data:
        return 0.0
    host_s = cost_model.input_time_s(samples_per_node(plan)) or decode_time_s(cost_model, plan)
    read = storage(cost_model, plan)
    if read.terms or read.unknown:
        pred.details["storage"] = {"seconds": read.seconds, "binding": read.binding, "terms": dict(read.terms),
                                   "unknown": list(read.unknown), "cache_hit": read.cache_hit,
                                   "staging_s": read.staging_s, "high_s": read.high_s}
    pred.storage_s = read.seconds
    if host_s <= 0.0 and read.seconds <= 0.0:
        return 0.0
    device_s = (pred.compute_fwd_s + pred.compute_bwd_s + pred.update_s + pred.comm_exposed_total_s + pred.bubble_s
                + pred.swap_s + pred.recompute_s + pred.straggler_s)
    if host_s > 0.0:
        pred.details["input_host_s"] = host_s
    return max(0.0, max(host_s, read.seconds) - device_s)
