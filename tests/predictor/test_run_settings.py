"""A validation run's math settings (issue 40's full-size check): dtype tf32, bf16 autocast and cuDNN's search
in suites, set for each run and put back after it; the predictions of the full-size suite; a calibrated GPU
profile costing a tf32 run's memory-bound ops; the report's best setting per model."""
from __future__ import annotations

import json

import pytest
import torch

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor import validate_report
from predictor.cli import main
from predictor.cmd_validate import predict_suite
from predictor.runner.config import RunConfig
from predictor.runner.settings import autocast_forward, run_settings
from predictor.runner.suite import load_suite
from profiler.errors import UserError

TINY_GPT = ("{model: gpt, knobs: {layers: 1, hidden: 32, heads: 2, seq: 8, vocab: 64}, batch: 2, ranks: 1, "
            "strategy: serial")


def _suite(tmp_path, *entries):
    path = tmp_path / "suite.yaml"
    path.write_text("warmup: 0\niterations: 1\nruns:\n" + "".join(f"  - {e}}}\n" for e in entries))
    return str(path)


def test_suite_reads_tf32_autocast_and_cudnn_search(tmp_path):
    suite = load_suite(_suite(tmp_path, TINY_GPT + ", dtype: tf32, cudnn_benchmark: true", TINY_GPT + ", amp: bf16",
                              TINY_GPT))
    tf32, amp, plain = suite.runs
    assert (tf32.dtype, tf32.amp, tf32.cudnn_benchmark, tf32.plan_dtype) == ("tf32", "", True, "tf32")
    assert (amp.dtype, amp.amp, amp.cudnn_benchmark, amp.plan_dtype) == ("fp32", "bf16", False, "bf16")
    assert (plain.plan_dtype, plain.cudnn_benchmark) == ("fp32", False)


@pytest.mark.parametrize("extra,needle", [
    (", amp: fp8", "amp must be bf16"),
    (", amp: bf16, dtype: bf16", "dtype must be fp32"),
    (", cudnn_benchmark: yes please", "cudnn_benchmark must be true or false"),
    (", dtype: int8", "dtype must be fp32, tf32, bf16, fp16"),
])
def test_a_bad_setting_is_a_one_line_error_naming_the_line(tmp_path, extra, needle):
    path = _suite(tmp_path, TINY_GPT + extra)
    with pytest.raises(UserError, match=needle) as err:
        load_suite(path)
    assert f"{path}:4" in str(err.value) and "\n" not in str(err.value)


def test_run_settings_are_the_runs_and_are_put_back():
    backends = torch.backends

    def flags():
        return backends.cudnn.benchmark, backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32

    before = flags()
    with run_settings(RunConfig("gpt", "serial", 1, 2, dtype="tf32", cudnn_benchmark=True)):
        assert flags() == (True, True, True)
    with run_settings(RunConfig("gpt", "serial", 1, 2)):  # fp32: TF32 off in both (PyTorch leaves cuDNN's on)
        assert flags() == (False, False, False)
    assert flags() == before


def test_autocast_forward_runs_the_forward_in_bf16_and_keeps_fp32_weights():
    class One:
        def __init__(self):
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x, y):
            return self.linear(x)

    replica = One()
    autocast_forward(replica, "", "cpu")
    assert replica.forward(torch.ones(2, 4), None).dtype == torch.float32
    autocast_forward(replica, "bf16", "cpu")
    assert replica.forward(torch.ones(2, 4), None).dtype == torch.bfloat16
    assert replica.linear.weight.dtype == torch.float32


@pytest.mark.slow  # measures real (tiny) training steps
def test_validate_runs_and_records_each_setting(tmp_path, capsys):
    out = tmp_path / "runs.jsonl"
    suite = _suite(tmp_path, TINY_GPT, TINY_GPT + ", dtype: tf32, cudnn_benchmark: true", TINY_GPT + ", amp: bf16")
    profile = str(shipped_profile("h100-dgx-8gpu.published"))
    assert main(["validate", "--profile", profile, "--suite", suite, "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["dtype"], r["amp"], r["cudnn_benchmark"]) for r in rows] == [
        ("fp32", "", False), ("tf32", "", True), ("fp32", "bf16", False)]
    assert [r["scenario"].split("/", 3)[-1] for r in rows] == ["fp32", "tf32/cudnn-benchmark", "amp-bf16"]
    assert all(r["predicted_time_s"] > 0 and r["measured_time_s"] > 0 for r in rows)
    plans = [r["prediction"]["plan"] for r in rows]
    assert [(p["dtype"], p["mixed_precision"]) for p in plans] == [("fp32", "autocast"), ("tf32", "autocast"),
                                                                   ("bf16", "autocast")]
    assert "best setting (samples per second)" in capsys.readouterr().out


def test_the_full_size_suite_is_predicted_by_the_shipped_h100_and_h200_profiles():
    """Every run of gpu_full (issue 40: ResNet-50, VGG16, BERT-base, GPT-2 small in fp32, tf32 and bf16 autocast;
    CosmoFlow, DeepCAM and a Qwen3-shaped mixture of experts in bf16) has a
    prediction from the published H100 profile and from the calibrated H200 one (a tf32 run's memory-bound ops costed
    in float32, which the GPU grid measures them in); faster in bf16 than in fp32 throughout."""
    suite = load_suite("gpu_full")
    assert {r.model for r in suite.runs} == {"resnet50", "vgg16", "bert", "gpt", "cosmoflow", "deepcam"} \
        and suite.iterations == 50
    assert {r.plan_dtype for r in suite.runs} == {"fp32", "tf32", "bf16"}
    assert len([r for r in suite.runs if dict(r.knobs).get("experts")]) == 2
    for name in ("h100-dgx-8gpu.published", "h200"):
        times = {}
        for run_, _, _, pred, why in predict_suite(suite, load_cost_model(shipped_profile(name))):
            assert pred is not None and pred.feasible, (name, run_.model, run_.plan_dtype, why)
            times[(run_.model, run_.batch, run_.plan_dtype)] = pred.iteration_s
        for (model, batch, dtype), t in times.items():
            if dtype == "bf16" and (model, batch, "fp32") in times:
                assert t < times[(model, batch, "fp32")], (name, model, batch)
    # every network at two batch sizes in some dtype: a batch series (predictor.published.batch_series)
    for model in {r.model for r in suite.runs}:
        assert any(len({r.batch for r in suite.runs if r.model == model and r.plan_dtype == d}) >= 2
                   for d in ("fp32", "bf16")), model
    assert len(load_suite("gpu_full_ddp").runs) == 6


def test_a_tf32_memory_bound_op_costs_as_float32_where_only_that_was_measured():
    model = load_cost_model(shipped_profile("h200"))  # a GPU calibration: tf32 convolutions, float32 batch norms
    assert "conv2d/fwd/tf32" in model.coefficients.compute and "batchnorm/fwd/tf32" not in model.coefficients.compute
    params = dict(N=32, C=64, H=56, W=56)
    assert model.compute_time_s("batchnorm", "fwd", params, "tf32") == model.compute_time_s("batchnorm", "fwd", params,
                                                                                           "float32")


def test_best_setting_and_least_accuracy_by_hand():
    def row(batch, precision, predicted, measured):
        return {"model": "resnet50", "knobs": {}, "label": "serial", "batch": batch,
                "scenario": f"resnet50()/B{batch}/p1/{precision}", "predicted_time_s": predicted,
                "measured_time_s": measured}
    rows = [row(64, "fp32", 1.0, 1.0), row(128, "fp32", 1.5, 2.5), row(128, "amp-bf16", 1.0, 0.8)]
    # samples per second, predicted: 64, 85, 128 (amp best); measured: 64, 51, 160 (amp best)
    assert validate_report.setting_ranking(rows) == [{"model": "resnet50()", "strategy": "serial",
                                                       "predicted_best": "B128/p1/amp-bf16",
                                                       "measured_best": "B128/p1/amp-bf16", "agree": True, "runs": 3}]
    assert validate_report.least_accuracy(rows) == pytest.approx(0.6)  # 1 - |1.5 - 2.5| / 2.5
    assert validate_report.setting_ranking(rows[:1]) == []


def test_a_dataset_row_is_predicted_again_with_its_cudnn_search(tmp_path, monkeypatch):
    """predictor model-error and the other dataset readers predict each row with the cuDNN search it ran with
    (PyTorch's default, off, for rows that do not say)."""
    import dataclasses

    import predictor.api as api
    from predictor.datasets import repredicted
    from predictor.plan import Plan

    plan = dataclasses.asdict(Plan("serial", batch=2, devices=1, devices_per_node=1))
    knobs = {"width": 4, "image": 16}
    rows = [{"label": "serial", "scenario": f"s{i}", "model": "small_cnn2d", "knobs": knobs, "measured_time_s": 0.01,
             "prediction": {"plan": plan}, **extra}
            for i, extra in enumerate(({"cudnn_benchmark": True}, {"cudnn_benchmark": False}, {}))]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen, real = [], api.predict

    def spy(graph, plan, cost_model, **kw):
        seen.append(cost_model.conv_algorithm_search)
        return real(graph, plan, cost_model, **kw)

    monkeypatch.setattr(api, "predict", spy)
    model = load_cost_model(shipped_profile("v100-dgx1-8gpu.published"))
    assert [label for label, *_ in repredicted([str(path)], model)] == ["serial"] * 3
    assert seen == [True, False, False]  # rows s0, s1, s2
