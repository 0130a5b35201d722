"""The input pipeline term: the decode+augment benchmark, its fit, and the exposed host time in a prediction."""
from dataclasses import replace

import numpy as np
import pytest

from calibrate.coefficients import Estimate, InputPipelineFit
from calibrate.input_fit import fit_input
from predictor.input_pipeline import exposed_input_s, samples_per_node
from predictor.plan import Plan, Prediction
from profiler.bench_input import IMAGES, SOURCE_SIZE, decode_augment, input_cases, synthetic_jpegs
from profiler.profile import Sample


def test_decode_augment_makes_a_normalised_crop():
    blob = synthetic_jpegs(1, SOURCE_SIZE)[0]
    x = decode_augment(blob, 224, np.random.default_rng(0))
    assert x.shape == (3, 224, 224) and x.dtype == np.float32 and -3 < x.mean() < 3
    case = input_cases(quick=True)[0]
    assert case.benchmark == "input" and case.params["images"] == IMAGES
    outputs = case.build()()
    assert len(outputs) == IMAGES


def test_fit_input_is_core_seconds_per_sample():
    samples = [Sample(benchmark="input", variant="decode_augment", device="cpu", dtype="uint8", threads=1,
                      params={"images": 16, "crop": 224}, times_s=[0.048, 0.050, 0.052])]
    fit = fit_input(samples, np.random.default_rng(0))
    assert fit.per_sample_core_s.value == pytest.approx(0.050 / 16)
    assert fit.per_sample_core_s.low <= fit.per_sample_core_s.value <= fit.per_sample_core_s.high


class _Host:
    """A node of 10 cores that needs 2 ms of one core per sample."""

    def input_time_s(self, samples):
        return samples * 2e-3 / 10


def test_exposed_input_by_hand():
    plan = Plan("data", batch=512, devices=16, devices_per_node=8, p_data=16)
    assert samples_per_node(plan) == 8 * 32          # 8 replicas on a node, 32 samples each
    pred = Prediction(plan=plan, compute_fwd_s=0.01, compute_bwd_s=0.02)
    # host: 256 samples * 2 ms / 10 cores = 51.2 ms; the device works 30 ms: 21.2 ms exposed
    assert exposed_input_s(_Host(), plan, pred) == pytest.approx(0.0212)
    assert exposed_input_s(_Host(), replace(plan, synthetic_data=True), pred) == 0.0
    slow_device = Prediction(plan=plan, compute_fwd_s=0.05, compute_bwd_s=0.05)
    assert exposed_input_s(_Host(), plan, slow_device) == 0.0
    pred.input_s = 0.0212
    pred.finish()
    assert pred.iteration_s == pytest.approx(0.0512) and pred.bottleneck == "input pipeline"


def test_model_parallel_groups_load_once_per_group():
    plan = Plan("data+filter", batch=64, devices=16, devices_per_node=8, p_data=4, p_filter=4)
    assert samples_per_node(plan) == 2 * 16           # two filter groups per node, 16 samples each


def test_profile_cost_model_uses_the_node_cores():
    from calibrate.coefficients import Coefficients
    from calibrate.cost_model import ProfileCostModel

    fit = InputPipelineFit(per_sample_core_s=Estimate(value=3e-3, low=2e-3, high=4e-3))
    cm = ProfileCostModel(Coefficients(input_pipeline=fit), name="t", device_memory_bytes=1e9, devices_per_node=8,
                          provenance="calibrated", cpu_cores=40)
    assert cm.input_time_s(400) == pytest.approx(400 * 3e-3 / 40)
    assert cm.at_bound("high").input_time_s(400) == pytest.approx(400 * 4e-3 / 40)
    host = ProfileCostModel(Coefficients(input_pipeline=fit, device_is_host=True), name="t", device_memory_bytes=1e9,
                            devices_per_node=2, provenance="calibrated", cpu_cores=2)
    assert host.input_time_s(400) == 0.0  # CPU ranks train from in-memory tensors


class _Uncalibrated:
    """A published node of 24 cores without a calibrated input pipeline, its data source set by the run."""

    cpu_cores = 24

    def __init__(self, decode_core_s):
        from predictor.at_scale import IMAGENET

        self.data_source = replace(IMAGENET, decode_core_s=decode_core_s)

    def input_time_s(self, samples):
        return 0.0


def test_a_cpu_loader_decodes_on_the_node_cores_by_hand():
    """8 GPUs of a 24-core node at 256 images each, 7.14 ms of a core per image (tensorpack's OpenCV loader):
    2048 x 7.14 ms / 24 = 609 ms of host work a step; the device works 270 ms, so 339 ms is exposed."""
    from predictor.input_pipeline import decode_time_s

    plan = Plan("data", batch=256 * 16, devices=16, devices_per_node=8, p_data=16)
    host = _Uncalibrated(40 / 5600)
    assert decode_time_s(host, plan) == pytest.approx(2048 * (40 / 5600) / 24)
    pred = Prediction(plan=plan, compute_fwd_s=0.09, compute_bwd_s=0.18)
    assert exposed_input_s(host, plan, pred) == pytest.approx(2048 * (40 / 5600) / 24 - 0.27)
    assert exposed_input_s(_Uncalibrated(None), plan, pred) == 0.0  # decoded on the GPU, or not known
    assert exposed_input_s(host, replace(plan, synthetic_data=True), pred) == 0.0


def test_published_cpu_loaders_come_from_the_mapping():
    """gluon-cv's ImageRecordIter and TF 2's tf.data decode on the CPU; Paddle's AMP rows ran DALI; NGC's MXNet DALI."""
    from predictor.published.corpus import CORPUS_DIR, load_corpus
    from predictor.published.rowmap import interpret, load_rules

    rules = load_rules()
    setups = {r.id: interpret(r, rules) for r in load_corpus(CORPUS_DIR / "cnn_runs.yaml")}
    assert setups["dlperf-resnet50_v1.5-mxnet_gluoncv-amp-8gpu"].decode_core_s == pytest.approx(40 / 5600)
    assert setups["dlperf-resnet50_v1.5-tf2-amp-8gpu"].decode_core_s == pytest.approx(40 / 11000)
    assert setups["dlperf-resnet50_v1.5-paddle-fp32-8gpu"].decode_core_s == pytest.approx(40 / 5600)
    assert setups["dlperf-resnet50_v1.5-paddle-amp-8gpu"].decode_core_s is None
    assert setups["dlperf-resnet50_v1.5-ngc_mxnet-amp-8gpu"].decode_core_s is None
    assert setups["tfbench-dgx1-p100-vgg16-synthetic-b64-8gpu"].decode_core_s is None


def test_cli_decode_makes_a_cpu_loader_the_bottleneck(capsys):
    """--decode opencv on a published profile (no calibrated input pipeline): 8 V100s at 256 ResNet-50 images each
    need 2048 x 7.14 ms / 24 cores = 609 ms of the node's CPU a step, more than their 0.3 s of GPU work."""
    from predictor.cli import main

    argv = ["run", "--profile", "v100-dgx1-1edr-8gpu.published", "--model", "resnet50", "--dtype", "fp16",
            "--batch", "2048", "--gpus", "8", "--strategy", "data", "--json"]
    import json
    assert main(argv) == 0
    gpu = json.loads(capsys.readouterr().out)
    assert main(argv + ["--decode", "opencv"]) == 0
    cpu = json.loads(capsys.readouterr().out)
    plan_gpu, plan_cpu = gpu["predictions"][0], cpu["predictions"][0]
    assert plan_gpu["bottleneck"] != "input pipeline" and plan_cpu["bottleneck"] == "input pipeline"
    assert plan_cpu["iteration_s"] == pytest.approx(2048 * (40 / 5600) / 24, rel=1e-6)
