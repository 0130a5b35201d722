"""The at-scale terms of a prediction (predictor.at_scale, calibrate.storage_model; docs/method.md §19a, §21, §25):
the straggler term and the storage term by hand, the storage bottleneck, unknown storage as a range, and the
interval widened by the at-scale range."""
from __future__ import annotations

import pytest

from calibrate.coefficients import Estimate, StorageFit
from calibrate.storage_model import PAGE_CACHE_SHARE, UNKNOWN_FLOOR, StorageDemand, storage_time
from predictor.api import default_plans, load_cost_model, load_model, predict
from predictor.at_scale import IMAGENET, DataSource, straggler_s, with_data_source
from predictor.plan import Plan, Prediction
from predictor.synthetic import SyntheticCostModel


def _rate(value: float) -> Estimate:
    return Estimate(value=value, low=value / 2, high=value * 2)


def test_imagenet_bytes_per_sample_from_its_source():
    assert IMAGENET.sample_bytes == pytest.approx(115.4e3, rel=0.01)  # 147.8 GB / 1,281,167 files
    assert IMAGENET.dataset_bytes == pytest.approx(147.8e9)


def test_storage_terms_by_hand():
    fit = StorageFit(filesystem="lustre", shared=True, aggregate_read_bytes_per_s=_rate(10e9),
                     metadata_ops_per_s=_rate(200e3), node_read_bytes_per_s=_rate(2e9), node_files_per_s=_rate(20e3),
                     page_cache_bytes_per_s=_rate(20e9))
    # 64 nodes x 256 samples of 100 kB, one file each; 1 TB dataset, nodes of 512 GB: the cache holds 256 GB
    demand = StorageDemand(samples_per_node=256, nodes=64, sample_bytes=100e3, files_per_sample=1.0,
                           dataset_bytes=1e12)
    t = storage_time(fit, 512e9, demand)
    hit = PAGE_CACHE_SHARE * 512e9 / 1e12
    miss = 1 - hit
    assert t.cache_hit == pytest.approx(hit)
    assert t.terms["shared file system bandwidth"] == pytest.approx(64 * 256 * 100e3 * miss / 10e9)
    assert t.terms["shared file system metadata"] == pytest.approx(64 * 256 * miss / 200e3)
    assert t.terms["node read bandwidth"] == pytest.approx(256 * 100e3 * miss / 2e9)
    assert t.terms["node file opens"] == pytest.approx(256 * miss / 20e3)
    assert t.terms["page cache"] == pytest.approx(256 * 100e3 * hit / 20e9)
    assert t.binding == "shared file system bandwidth" and t.seconds == max(t.terms.values())
    # the interval's slow end takes each rate's low end
    assert storage_time(fit, 512e9, demand, "high").seconds == pytest.approx(2 * t.seconds)
    # staged on node-local NVMe: only the local reads per step, the copy once
    local = fit.model_copy(update={"local_read_bytes_per_s": _rate(6e9), "local_capacity_bytes": 4e12})
    staged = storage_time(local, 512e9, StorageDemand(256, 64, 100e3, 1.0, 1e12, staged=True))
    assert staged.terms["node-local storage"] == pytest.approx(256 * 100e3 * miss / 6e9)
    assert staged.staging_s == pytest.approx(1e12 / min(2e9, 10e9 / 64))


def test_unknown_storage_is_a_range_not_zero():
    demand = StorageDemand(samples_per_node=256, nodes=64, sample_bytes=100e3, files_per_sample=1.0,
                           dataset_bytes=1e13)
    point = storage_time(StorageFit(), 64e9, demand)
    assert point.seconds == 0.0 and "aggregate_read_bytes_per_s" in point.unknown
    high = storage_time(StorageFit(), 64e9, demand, "high")
    miss = 1 - PAGE_CACHE_SHARE * 64e9 / 1e13
    floors = {"bandwidth": 64 * 256 * 100e3 * miss / UNKNOWN_FLOOR["aggregate_read_bytes_per_s"],
              "metadata": 64 * 256 * miss / UNKNOWN_FLOOR["metadata_ops_per_s"]}
    assert high.seconds == pytest.approx(max(floors.values()))  # 16,384 opens at 5,000/s: the metadata binds
    assert high.binding == "shared file system metadata"


@pytest.fixture()
def slow_shared_storage():
    """The DGX-1 reference profile reading a 10 TB dataset (nothing fits the page cache) from a shared file system of
    5 GB/s for every node."""
    cm, _ = load_cost_model("v100-dgx1-8gpu.published")
    cm.coefficients = cm.coefficients.model_copy(update={"storage": StorageFit(
        filesystem="nfs", shared=True, aggregate_read_bytes_per_s=_rate(5e9), metadata_ops_per_s=_rate(1e6),
        node_read_bytes_per_s=_rate(5e9), node_files_per_s=_rate(1e6))})
    with_data_source(cm, DataSource("big", sample_bytes=115e3, files_per_sample=1.0, samples=87_000_000))
    return load_model("resnet50"), cm


def test_storage_binds_and_is_the_bottleneck(slow_shared_storage):
    graph, cm = slow_shared_storage
    plan = default_plans(graph, "data", 256 * 64, 64, 8, "fp16", "momentum")[0]
    pred = predict(graph, plan, cm)
    info = pred.details["storage"]
    assert info["binding"] == "shared file system bandwidth" and info["cache_hit"] < 0.03  # 256 GB of 10 TB
    assert pred.storage_s == pytest.approx(256 * 64 * 115e3 * (1 - info["cache_hit"]) / 5e9)
    assert pred.input_s > 0 and pred.bottleneck == "shared storage"
    # with synthetic data nothing is read
    import dataclasses
    synthetic = predict(graph, dataclasses.replace(plan, synthetic_data=True), cm)
    assert synthetic.storage_s == 0.0 and synthetic.bottleneck != "shared storage"


def test_run_breakdown_shows_the_storage_range():
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "predictor", "run", "--profile", "v100-dgx1-8gpu.published",
                           "--model", "resnet50", "--batch", "2048", "--gpus", "64", "--strategy", "data",
                           "--dataset-size", "50000000", "--wide"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "storage" in done.stdout and "?" in done.stdout  # 0-<floor> ? : the profile does not know its storage
    assert "unknown: aggregate read bytes" in done.stdout


class _Spread(SyntheticCostModel):
    def straggler_excess(self, kind, ranks):
        return {"device": 0.02, "step": 0.01, "collective": 0.1}[kind] if ranks > 1 else 0.0


def test_straggler_term_by_hand():
    plan = Plan("data+pipeline", batch=64, devices=16, devices_per_node=4, p_data=4, stages=4, micro_batches=4)
    pred = Prediction(plan=plan, compute_fwd_s=1.0, compute_bwd_s=2.0, update_s=0.5, bubble_s=0.5,
                      comm_exposed_s={"gradient": 0.2, "pipeline_p2p": 0.1})
    cm = _Spread()
    # (compute + update + recompute) (device + step) + sum exposed_c collective(g_c): not the bubble, whose fill and
    # drain pass each stage once (a slow stage delays the step over the micro-batches it runs)
    assert straggler_s(cm, plan, pred) == pytest.approx(3.5 * 0.03 + 0.2 * 0.1 + 0.1 * 0.1)
    more_bubble = Prediction(plan=plan, compute_fwd_s=1.0, compute_bwd_s=2.0, update_s=0.5, bubble_s=5.0,
                             comm_exposed_s={"gradient": 0.2, "pipeline_p2p": 0.1})
    assert straggler_s(cm, plan, more_bubble) == pytest.approx(straggler_s(cm, plan, pred))
    assert pred.details["stragglers"]["ranks"] == 16
    one = Plan("serial", batch=64, devices=1, devices_per_node=4)
    assert straggler_s(cm, one, Prediction(plan=one, compute_fwd_s=1.0)) == 0.0
    assert straggler_s(SyntheticCostModel(), plan, pred) == 0.0  # no spread: no term


def test_interval_widened_by_the_at_scale_range():
    graph = load_model("resnet50")
    cm, _ = load_cost_model("v100-abci-4gpu.published")
    plan = default_plans(graph, "data", 32 * 512, 512, 4, "fp32", "momentum")[0]
    pred = predict(graph, plan, cm)
    lo, hi = pred.details["at_scale_range"]
    assert lo < 1.0 < hi  # quiet fabric and fast GPUs below, busy and slow ones above
    bounds = cm.model_error_bounds(plan.strategy, plan.framework)
    assert pred.interval_s[1] >= pred.iteration_s * bounds[1] * hi * (1 - 1e-9)
    assert pred.interval_s[0] <= pred.iteration_s * bounds[0] * lo * (1 + 1e-9)
    assert pred.straggler_s > 0
