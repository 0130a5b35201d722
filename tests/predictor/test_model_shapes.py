"""Model-specific calibration: `predictor shapes` records the compute calls a model's predictions cost,
`profiler calibrate --shapes` measures them, and the cost model then costs exactly those calls by their
measured times (the fits cover every other shape). Bad shapes files get one-line errors."""
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from calibrate.coefficients import MeasuredShape
from calibrate.cost_model import load_cost_model
from calibrate.fit import fit_profile, measured_shapes
from calibrate.synthetic import conv_samples, profile_with
from predictor.api import load_cost_model as predictor_cost_model, load_model, predict_all
from predictor.shape_recorder import RecordingCostModel, measurable_shapes
from paraoracle.cli import profiler_main
from profiler.profile import load_profile, save_profile

TINY = {**os.environ, "PARAORACLE_GRID": "tiny", "PYTHONUNBUFFERED": "1"}
CONV = {"N": 2, "C": 4, "F": 4, "H": 16, "W": 16, "kernel": 3, "stride": 1, "padding": 1}


def cli(tool, *args):
    """`profiler` or `predictor` as a user runs it (the `profiler` command is paraoracle.cli)."""
    module = {"profiler": "paraoracle.cli"}.get(tool, tool)
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=TINY, timeout=300)


def test_recorded_shapes_are_what_the_predictions_cost():
    graph = load_model("small_cnn2d", width=4, image=16)
    base, _ = predictor_cost_model(None)  # the shipped reference profile
    recorder = RecordingCostModel(base)
    predict_all(graph, 8, 2, recorder, strategies=("serial", "data", "filter"), interval=False)
    entries = measurable_shapes(recorder.calls)
    convs = [e for e in entries if e["op"] == "conv2d"]
    assert convs and all(e["dtype"] == "float32" for e in entries)
    batches = {e["params"]["N"] for e in convs}
    assert {8, 4} <= batches  # serial (whole batch) and data parallel (half on each of 2 devices)
    linears = [e for e in entries if e["op"] == "linear"]  # measured in their three passes
    assert {8, 4} <= {e["params"]["M"] for e in linears}
    assert len({(e["op"], tuple(sorted(e["params"].items()))) for e in entries}) == len(entries)


def test_gemm_backward_passes_become_forward_gemms_and_linear_passes_one_linear_entry():
    linear = (("K", 64), ("M", 8), ("N", 10))
    calls = {("gemm", "bwd_data", linear, "float32"), ("linear", "bwd_data", linear, "float32"),
             ("linear", "bwd_weight", linear, "float32"),
             ("batchnorm", "bwd_weight", (("C", 4), ("H", 8), ("N", 2), ("W", 8)), "float32")}
    assert measurable_shapes(calls) == [{"op": "gemm", "params": {"M": 8, "N": 64, "K": 10}, "dtype": "float32"},
                                        {"op": "linear", "params": {"K": 64, "M": 8, "N": 10}, "dtype": "float32"}]


def test_measured_shapes_override_the_fit_for_exactly_those_shapes():
    rng = np.random.default_rng(0)
    grid = [dict(CONV, N=n, C=c) for n in (1, 2, 4, 8) for c in (4, 8, 16)]
    samples = conv_samples(grid, lambda flops, nbytes: 1e-5 + flops / 5e10, rng, noise=0.0)
    special = conv_samples([dict(CONV, N=3)], lambda flops, nbytes: 7e-3, rng, noise=0.0)  # far off the curve
    profile = fit_profile(profile_with(samples + special))
    table = measured_shapes(samples + special)
    assert MeasuredShape(family="conv2d/fwd/float32", params=dict(CONV, N=3), time_s=7e-3) in table
    cm = load_cost_model(profile)
    assert cm.compute_time_s("conv2d", "fwd", dict(CONV, N=3), "fp32") == pytest.approx(7e-3)
    reordered = dict(reversed(list(dict(CONV, N=3).items())))
    assert cm.compute_time_s("conv2d", "fwd", reordered, "fp32") == pytest.approx(7e-3)
    unmeasured = cm.compute_time_s("conv2d", "fwd", dict(CONV, N=5), "fp32")
    assert unmeasured < 1e-3  # from the fit, which the one outlier barely moves


def test_a_shape_measured_in_two_passes_counts_once_with_the_mean_of_all_its_calls():
    """The compute section sweeps every shape twice; a shape is one point (never on both sides of a
    cross-validation split) whose time is the mean over the calls of both passes, as a run's step time is the
    mean of its steps: a slow window of the machine weighs in the calibration as it weighs in a run."""
    rng = np.random.default_rng(1)
    grid = [dict(CONV, N=n, C=c) for n in (1, 2, 4, 8) for c in (4, 8, 16)]
    curve = lambda flops, nbytes: 1e-5 + flops / 5e10  # noqa: E731
    fast = conv_samples(grid, curve, rng, noise=0.0)
    slow = [s.model_copy(update={"times_s": [1.6 * t for t in s.times_s]}) for s in fast[:6]]  # a slow window
    both = fit_profile(profile_with(slow + fast))
    assert both.coefficients["compute"]["conv2d/fwd/float32"]["n_samples"] == len(grid)
    table = {tuple(sorted(m.params.items())): m.time_s for m in measured_shapes(slow + fast)}
    assert len(table) == len(grid)
    for i, sample in enumerate(fast):
        calls = sample.times_s + (slow[i].times_s if i < len(slow) else [])
        assert table[tuple(sorted(sample.params.items()))] == pytest.approx(float(np.mean(calls)))
    assert table[tuple(sorted(fast[0].params.items()))] == pytest.approx(1.3 * float(np.mean(fast[0].times_s)))


@pytest.mark.slow  # a calibration in a subprocess
def test_shapes_cli_to_calibrate_end_to_end(tmp_path):
    shapes_path, out = tmp_path / "shapes.yaml", tmp_path / "p.yaml"
    r = cli("predictor", "shapes", "--model", "small_cnn2d", "--model-arg", "width=4", "--model-arg", "image=16",
            "--batch", "4", "--gpus", "2", "--strategy", "data", "--out", str(shapes_path))
    assert r.returncode == 0, r.stderr
    entries = yaml.safe_load(shapes_path.read_text())["shapes"]
    r = cli("profiler", "calibrate", "--device", "cpu", "--only", "compute", "--shapes", str(shapes_path),
            "--out", str(out))
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    assert profile.settings["shapes_file"]["points"] >= len(entries)
    measured = {(s.benchmark, tuple(sorted(s.params.items()))) for s in profile.samples
                if s.extra.get("source") == "shapes file"}
    assert {(e["op"], tuple(sorted(e["params"].items()))) for e in entries} <= measured
    # measured as the grid's points are: cycling through operand copies unless they outgrow the rotation
    assert profile.settings["operands"].startswith("rotating")
    assert any(s.extra.get("operand_copies", 1) > 1 for s in profile.samples if s.extra.get("source") == "shapes file")
    cm = load_cost_model(out)
    conv = next(e for e in entries if e["op"] == "conv2d")
    passes = [s.times_s for s in profile.samples if s.benchmark == "conv2d" and s.variant == "fwd"
              and s.params == conv["params"]]
    assert len(passes) == 2  # the compute section sweeps twice; the mean over both passes' calls is the shape's time
    assert cm.compute_time_s("conv2d", "fwd", conv["params"], "fp32") == pytest.approx(
        float(np.mean(passes[0] + passes[1])))


@pytest.mark.parametrize("text, needle", [
    ("shapes: []", "non-empty list under 'shapes:'"),
    ("shapes: [{op: hardswish, params: {N: 1}}]", "op 'hardswish' cannot be measured"),
    ("shapes: [{op: conv2d, params: {N: 1, C: 2}}]", "conv2d needs params F, H, W, kernel"),
    ("shapes: [{op: relu, params: {N: 1, C: 2, H: 0, W: 4}}]", "params.H must be a positive integer"),
    ("shapes: [{op: gemm, params: {M: 2, N: 2, K: 2}, dtype: float16}]", "dtype float16 is not measured on cpu"),
    ("shapes: [{op: relu, params: {N: 1, C: 2, H: 4, W: 4}}", "not valid YAML"),
])
def test_bad_shapes_file_is_one_line_error(tmp_path, capsys, text, needle):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    code = profiler_main(["calibrate", "--device", "cpu", "--only", "compute", "--shapes", str(bad),
                          "--out", str(tmp_path / "p.yaml")])  # in-process: an uncaught error fails the test
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err and str(bad) in err
    assert not (tmp_path / "p.yaml").exists()


def test_shapes_needs_the_compute_section(tmp_path, capsys):
    code = profiler_main(["calibrate", "--device", "cpu", "--only", "memory", "--shapes", "x.yaml",
                          "--out", str(tmp_path / "p.yaml")])
    assert code == 2 and "add compute to --only" in capsys.readouterr().err
