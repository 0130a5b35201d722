"""`predictor scale` (issue 39): device counts parsed or refused in one line, each point equal to what `predictor run`
and `predictor search` predict there, efficiency from the baseline, the threshold and the crossovers, the plot and
the JSON."""
import json
import math
import subprocess
import sys

import pytest

from calibrate.shipped import shipped_profile
from predictor.api import load_cost_model, load_model, predict_all
from predictor.cli import main
from predictor.plan import Plan, Prediction
from predictor.scale_table import findings, table
from predictor.scaling import BEST, MAX_POINTS, Point, Sweep, _crossovers, _efficiency, parse_gpus, sweep
from predictor.search import search
from profiler.errors import UserError

V100 = str(shipped_profile("v100-abci-4gpu.published"))
SMALL = ["--model", "small_cnn2d", "--profile", V100]


@pytest.mark.parametrize("text,counts", [
    ("1-1024", tuple(1 << k for k in range(11))),
    ("3-100", (4, 8, 16, 32, 64)),
    ("8,1,4,4", (1, 4, 8)),
    ("1,3,8-32", (1, 3, 8, 16, 32)),
    (" 6 ", (6,)),
])
def test_device_counts(text, counts):
    assert parse_gpus(text, 1 << 20) == counts


@pytest.mark.parametrize("text,needle", [
    ("0", "must be in 1..1024, got 0"),
    ("8-4", "runs backwards (8 > 4)"),
    ("5-7", "no power of two"),
    ("four", "expected counts like"),
    ("1,,2", "expected counts like"),
    ("-4", "expected counts like"),
    ("1-2048", "got 2048"),
    (",".join(map(str, range(1, MAX_POINTS + 2))), f"more than {MAX_POINTS} device counts"),
])
def test_bad_device_counts_name_the_flag(text, needle):
    with pytest.raises(UserError, match="--gpus") as err:
        parse_gpus(text, 1024)
    assert needle in str(err.value)


def test_points_equal_what_run_and_search_predict():
    """A named line's point is `predictor run --strategy S` there; best's is `predictor search`'s top plan on
    exactly that count; efficiency is samples/s per device over the best per device at the smallest count."""
    graph, (cm, _) = load_model("small_cnn2d"), load_cost_model(V100)
    result = sweep(graph, cm, (1, 2, 4, 8), strategies=(BEST, "data", "data+spatial"), batch_per_device=16)
    for k, p in enumerate(result.devices):
        for name in ("data", "data+spatial"):
            [expected] = predict_all(graph, 16 * p, p, cm, strategies=(name,))
            got = result.lines[name][k].prediction
            assert got.plan == expected.plan and got.iteration_s == pytest.approx(expected.iteration_s, rel=1e-12)
            assert got.interval_s == pytest.approx(expected.interval_s, rel=1e-12)
        top = search(graph, cm, batch=16 * p, max_devices=p, min_devices=p, top=1).best[0]
        best = result.lines[BEST][k].prediction
        assert best.plan == top.plan and best.iteration_s == pytest.approx(top.iteration_s, rel=1e-12)
        assert result.lines[BEST][k].batch == 16 * p
    base = max(pt.samples_per_s for points in result.lines.values() for pt in points if pt.devices == 1)
    assert result.baseline_devices == 1 and result.baseline_samples_per_device_s == pytest.approx(base)
    for points in result.lines.values():
        for pt in points:
            assert pt.efficiency == pytest.approx(pt.samples_per_s / pt.devices / base)
            low, high = pt.efficiency_interval
            assert low <= pt.efficiency <= high


def _point(devices: int, strategy: str, iteration_s: float, batch: int = 64, fits: bool = True) -> Point:
    pred = Prediction(plan=Plan(strategy, batch=batch, devices=devices, devices_per_node=4, p_data=devices),
                      compute_fwd_s=iteration_s, activations_bytes=1e9 if fits else 1e12, device_memory_bytes=16e9)
    pred.finish()
    pred.interval_s = (0.9 * iteration_s, 1.2 * iteration_s)
    return Point(devices, batch, pred)


def _made(lines: dict, devices=(1, 2, 4, 8), threshold=0.8) -> Sweep:
    result = Sweep("toy", devices, lines, weak=False, batch_per_device=None, global_batch=64, threshold=threshold)
    _efficiency(result)
    _crossovers(result)
    return result


def test_threshold_and_crossovers_by_hand():
    """Strong scaling of 64 samples: data's time halves to 4 devices then stalls; pipeline overtakes at 8."""
    data = [_point(1, "serial", 1.0), _point(2, "data", 0.5), _point(4, "data", 0.3), _point(8, "data", 0.3)]
    pipe = [_point(1, "pipeline", 1.1), _point(2, "pipeline", 0.6), _point(4, "pipeline", 0.32),
            _point(8, "pipeline", 0.16)]
    best = [_point(1, "serial", 1.0), _point(2, "data", 0.5), _point(4, "data", 0.3), _point(8, "pipeline", 0.16)]
    result = _made({BEST: best, "data": data, "pipeline": pipe})
    assert result.baseline_devices == 1 and result.baseline_samples_per_device_s == pytest.approx(64.0)
    assert [pt.efficiency for pt in data] == pytest.approx([1.0, 1.0, 64 / 0.3 / 4 / 64, 64 / 0.3 / 8 / 64])
    # data: 83% at 4 devices, 42% at 8; pipeline: 78% at 4 already; best: pipeline's 78% at 8
    assert result.below_threshold == {BEST: 8, "data": 8, "pipeline": 4}
    assert result.last_efficient("data") == 4 and result.last_efficient("pipeline") == 2
    # steps: data doubles its devices for 1x, 1.67x, 1x the throughput; no step of the others is below 80%
    assert [pt.step_efficiency for pt in data] == pytest.approx([None, 1.0, 0.5 / 0.3 / 2, 0.5])
    assert result.step_below_threshold == {BEST: None, "data": 8, "pipeline": None}
    # serial -> data is data parallelism from one device to two: no crossover; data -> pipeline at 8 is one
    assert [(c.line, c.after_devices, c.at_devices, c.before, c.after) for c in result.crossovers] == [
        (BEST, 4, 8, "data (d4)", "pipeline (d8)"), ("named", 4, 8, "data (d4)", "pipeline (d8)")]
    text = findings(result)
    assert "data: efficiency drops below 80% at 8 GPUs (42%); 4 GPUs is the largest count before it" in text
    assert "pipeline: efficiency drops below 80% at 4 GPUs (78%); 2 GPUs is the largest count before it" in text
    assert any("between 4 and 8 GPUs: data (d4) -> pipeline (d8)" in line for line in text)
    header, rows = table(result)
    assert header[:3] == ["GPUs", "batch/GPU", "line"] and len(rows) == 12
    assert rows[-3][header.index("plan")] == "pipeline d8"  # best's cell names the strategy


def test_no_usable_baseline_point_is_said():
    oom = [_point(1, "serial", 1.0, fits=False), _point(2, "data", 0.5, fits=False)]
    result = _made({"data": oom}, devices=(1, 2))
    assert result.baseline_devices is None and all(pt.efficiency is None for pt in oom)
    assert findings(result) == ["no plan of any line fits in memory at any swept count: nothing to scale from"]


def test_cli_table_plot_json_and_no_clobber(tmp_path, capsys):
    png, svg = tmp_path / "scale.png", tmp_path / "scale.svg"
    args = ["scale", *SMALL, "--batch-per-gpu", "16", "--gpus", "1-16", "--strategy", BEST, "--strategy", "data"]
    assert main(args + ["--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "weak scaling, 16 samples per GPU" in out and "threshold 80%" in out and f"plot: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert main(args + ["--plot", str(png)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(args + ["--plot", str(svg), "--json", "--dataset-size", "50000", "--epochs", "2",
                        "--gpu-hour-cost", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert b"<svg" in svg.read_bytes()[:400]
    assert doc["scaling"] == "weak" and doc["devices"] == [1, 2, 4, 8, 16] and set(doc["lines"]) == {BEST, "data"}
    row = doc["lines"]["data"][2]
    pred = row["prediction"]
    assert row["devices"] == 4 and row["batch"] == 64 and pred["plan"]["devices"] == 4
    assert row["train_s"] == pytest.approx(2 * math.ceil(50000 / 64) * pred["iteration_s"])
    assert row["cost"] == pytest.approx(3 * row["gpu_hours"]) and row["gpu_hours"] == pytest.approx(
        row["train_s"] * 4 / 3600)
    for key in ("efficiency_threshold", "baseline_devices", "below_threshold_at_devices", "crossovers",
                "last_efficient_devices"):
        assert key in doc


@pytest.mark.parametrize("extra,flag", [
    (["--batch-per-gpu", "8", "--gpus", "0"], "--gpus"),
    (["--batch-per-gpu", "8", "--gpus", "8-4"], "--gpus"),
    (["--batch-per-gpu", "8", "--gpus", ",".join(map(str, range(1, 80)))], "--gpus"),
    (["--batch-per-gpu", "8", "--gpus", "many"], "--gpus"),
    (["--batch-per-gpu", "x"], "--batch-per-gpu"),
    (["--batch-per-gpu", "8", "--batch", "8"], "--batch"),
    (["--batch-per-gpu", "8", "--strategy", "diagonal"], "--strategy"),
    (["--batch-per-gpu", "8", "--efficiency-threshold", "0"], "--efficiency-threshold"),
    (["--batch-per-gpu", "8", "--gpu-hour-cost", "2"], "--gpu-hour-cost"),
    (["--batch-per-gpu", "8", "--plot", "scale.jpg"], "--plot"),
    (["--batch-per-gpu", "100000", "--gpus", "1-1024"], "--batch-per-gpu"),
])
def test_bad_flags_are_one_line_exit_2(extra, flag):
    done = subprocess.run([sys.executable, "-m", "predictor", "scale", *SMALL, *extra], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0]


def test_a_held_back_baseline_is_called_superlinear_and_the_step_says_where_it_stops_paying():
    """Strong scaling whose smallest fitting count swaps (10 s): efficiency stays far above 1, but the step from
    8 to 16 devices gains only 1.25x: the answer is 8."""
    best = [_point(2, "outofcore", 10.0), _point(4, "data", 0.5), _point(8, "data", 0.25), _point(16, "data", 0.2)]
    result = _made({BEST: best}, devices=(2, 4, 8, 16))
    assert result.below_threshold[BEST] is None and result.step_below_threshold[BEST] == 16
    assert result.last_efficient(BEST) == 8
    text = findings(result)
    assert "best: adding devices stops paying at 16 GPUs: the step there gains 62% of linear (below 80%); 8 GPUs is " \
           "the largest count before it" in text
    assert any(line.startswith("superlinear: best reaches 1000% at 4 GPUs; the baseline at 2 GPUs (outofcore (d2)) "
                               "is held back by") for line in text)
    assert text[-1].startswith("answer: up to 8 GPUs scale (efficiency and each step >= 80%) with data (d8)")


def test_best_ranks_under_the_sweeps_framework():
    """With --framework horovod the best line is `predictor search --framework horovod`'s top plan."""
    graph, (cm, _) = load_model("small_cnn2d"), load_cost_model(V100)
    result = sweep(graph, cm, (2, 8), strategies=(BEST,), batch_per_device=16, framework="horovod")
    for k, p in enumerate(result.devices):
        top = search(graph, cm, batch=16 * p, max_devices=p, min_devices=p, top=1, framework="horovod").best[0]
        best = result.lines[BEST][k].prediction
        assert best.plan == top.plan and best.plan.framework == "horovod"
        assert best.iteration_s == pytest.approx(top.iteration_s, rel=1e-12)
