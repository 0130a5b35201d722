"""The calibrated domain of a compute fit (calibrate.domain) and the extrapolated share of a plan's compute
(predictor.extrapolation, `predictor run`'s 'extrap.' column and JSON)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from calibrate import backends
from calibrate.coefficients import parse_coefficients
from calibrate.cost_model import load_cost_model
from calibrate.fit import compute_points
from calibrate.domain import NEAR_FACTOR, fit_domain, in_domain
from calibrate.shipped import shipped_profile
from predictor.api import load_model
from predictor.extrapolation import FLAG_SHARE, extrapolations, measure_command
from predictor.layercost import LayerCoster, Split
from predictor.plan import Plan
from predictor.synthetic import SyntheticCostModel
from profiler.profile import load_profile, save_profile

DATA = Path(__file__).resolve().parents[1] / "data"
NAMES = ["log_flops", "log_intensity", "log_min_dim", "log_batch", "log_in_channels", "log_out_channels",
         "log_spatial", "kernel_volume", "cpu_native_conv", "log_native_columns"]


def _features(flops_log, batch_log, kvol=9.0):
    # a conv-like call: only log_flops, log_batch and kernel_volume vary here
    return [flops_log, 1.0, 1.0, batch_log, 1.0, 1.0, 2.0, kvol, 0.0, 0.0]


def test_domain_ranges_and_points_by_hand():
    d = fit_domain(NAMES, [_features(8.0, 0.0), _features(9.0, 2.0)])
    assert d.features == ["log_flops", "log_min_dim", "log_batch", "log_in_channels", "log_out_channels",
                          "log_spatial", "kernel_volume"]
    assert d.low[0] == 8.0 and d.high[0] == 9.0 and d.low[2] == 0.0 and d.high[2] == 2.0
    assert d.low[-1] == d.high[-1] == round(math.log10(9.0), 3)  # kernel volume in log10
    assert in_domain(d, NAMES, _features(8.0, 0.0))  # a measured shape
    near = math.log10(NEAR_FACTOR)
    assert in_domain(d, NAMES, _features(8.0 + 0.9 * near, 0.0))  # within the factor of one sample
    assert not in_domain(d, NAMES, _features(7.9, 0.0))  # below the grid's FLOP range
    assert not in_domain(d, NAMES, _features(8.0, 0.0, kvol=49.0))  # a 7x7 kernel where only 3x3 was measured
    # in range in every feature, yet far from both samples (between two corners of the grid)
    assert not in_domain(d, NAMES, _features(8.9, 0.1))  # 0.9 decades from one, 1.9 from the other


def test_no_samples_no_domain():
    assert fit_domain(NAMES, []) is None


@dataclass(frozen=True)
class _HalfMeasured(SyntheticCostModel):
    """Convolutions extrapolated, every other call measured."""

    def compute_in_domain(self, op, pass_, params, dtype):
        return op not in ("conv2d", "conv3d", "gemm")


def _compute_only_sum(graph, cm, batch, ops=None):
    coster = LayerCoster(graph, _Only(cm, ops), "fp32")
    return sum(sum(coster.times(i, Split(n=batch))) for i in range(len(graph.layers)))


class _Only:
    """Compute calls only, optionally only of `ops` (the hand computation of the share)."""

    def __init__(self, cm, ops):
        self.cm, self.ops = cm, ops

    def compute_time_s(self, op, pass_, params, dtype):
        return self.cm.compute_time_s(op, pass_, params, dtype) if self.ops is None or op in self.ops else 0.0

    def framework_overhead_s(self, pass_):
        return 0.0

    def memory_time_s(self, bytes_moved, *, where="device"):
        return 0.0


def test_serial_share_is_the_extrapolated_calls_share_of_compute():
    graph = load_model("small_cnn2d", width=8, image=32)
    cm = _HalfMeasured(framework_fwd_s=1e-4, framework_bwd_s=1e-4)  # overheads must not count
    plan = Plan("serial", batch=16, devices=1, devices_per_node=1)
    (ex,) = extrapolations(graph, [plan], cm)
    expected = _compute_only_sum(graph, cm, 16, ops=("conv2d", "conv3d", "gemm")) / _compute_only_sum(graph, cm, 16)
    assert 0.0 < expected < 1.0
    assert ex.share == pytest.approx(expected, rel=1e-9)
    assert ex.calls > 0


def test_share_follows_the_plan_split_and_is_none_without_domain():
    graph = load_model("small_cnn2d", width=8, image=32)
    plans = [Plan("serial", batch=16, devices=1, devices_per_node=1), Plan("data", batch=16, devices=2, devices_per_node=2, p_data=2)]
    shares = [e.share for e in extrapolations(graph, plans, _HalfMeasured())]
    # data parallelism runs the same layers on half the batch: the share stays a share of compute
    assert 0.0 < shares[1] < 1.0 and shares[0] == pytest.approx(shares[1], rel=0.2)
    assert extrapolations(graph, plans, SyntheticCostModel()) == [None, None]


def _profile_with_domains(tmp_path) -> Path:
    """The quick CPU fixture profile with each compute fit's domain recorded from its own samples."""
    prof = load_profile(DATA / "drift_quick_cpu_profile.yaml")
    coefficients = parse_coefficients(prof.coefficients)
    backend = backends.for_profile(prof.machine, prof.samples)
    points = compute_points(prof.samples, backend)
    compute = {k: f.model_copy(update={"domain": fit_domain(backend.feature_names(k.split("/")[0]),
                                                            [p.features for p in points.get(k, [])])})
               for k, f in coefficients.compute.items()}
    coefficients = coefficients.model_copy(update={"compute": compute})
    prof = prof.model_copy(update={"coefficients": coefficients.model_dump(mode="json", exclude_none=True)})
    path = tmp_path / "with-domain.yaml"
    save_profile(prof, path)
    return path


def test_cost_model_reports_domain(tmp_path):
    path = _profile_with_domains(tmp_path)
    cm = load_cost_model(path)
    conv = cm.coefficients.compute["conv2d/fwd/float32"]
    assert conv.domain is not None and conv.domain.points
    # far beyond the quick grid: batch 256 at 224x224
    big = dict(N=256, C=64, F=64, H=224, W=224, kernel=3, stride=1, padding=1)
    assert cm.compute_in_domain("conv2d", "fwd", big, "float32") is False
    published = load_cost_model(shipped_profile("v100-dgx1-8gpu.published"))
    assert published.compute_in_domain("conv2d", "fwd", big, "float32") is None


def test_predictor_run_flags_extrapolation(tmp_path, capsys):
    from predictor.cli import main

    path = _profile_with_domains(tmp_path)
    args = ["run", "--profile", str(path), "--model", "small_cnn2d", "--model-arg", "width=64", "--model-arg",
            "image=128", "--batch", "64", "--gpus", "1", "--strategy", "serial"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    share = out["predictions"][0]["extrapolated_share"]
    assert share is not None and share > FLAG_SHARE
    assert out["extrapolation"]["strategies"] == ["serial"]
    assert out["extrapolation"]["measure_command"].startswith("profiler calibrate --device cpu --model small_cnn2d")
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "extrap." in text and "to measure them" in text and "--model-arg width=64" in text


def test_measure_command_quotes_arguments():
    cmd = measure_command("my net.py", ["width=8"], 32, 4, "data", device_is_host=False)
    assert cmd == ("profiler calibrate --device cuda --model 'my net.py' --model-arg width=8 --batch 32 --gpus 4 "
                   "--strategy data --out PROFILE.yaml")
