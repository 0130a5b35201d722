"""Prediction intervals from measured runs (predictor.model_error, `predictor model-error`): quantiles and the
held-out coverage by hand, and the command end to end on a dataset whose measured times are known multiples of
the profile's own predictions."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from predictor.model_error import Residual, error_quantiles, held_out_coverage, in_sample_coverage

PROFILE = Path(__file__).resolve().parents[1] / "data" / "drift_quick_cpu_profile.yaml"


def test_quantiles_by_hand():
    runs = [("serial", "ddp", "m", float(v)) for v in range(-4, 6)]
    q = error_quantiles(runs, coverage=0.8, min_rows=10)
    # |r| = 4 3 2 1 0 1 2 3 4 5; numpy's linear interpolation: its 80% quantile is 4 (sorted 0 1 1 2 2 3 3 4 4 5)
    assert q["*"] == pytest.approx((-4.0, 4.0)) and q["serial/*"] == q["*"] and "serial/ddp" not in q
    assert set(error_quantiles(runs[:9], coverage=0.8, min_rows=10)) == {"*"}  # too few runs for a strategy key


def test_held_out_coverage_by_hand():
    """Groups a and b predicted exactly (r = 0), group c twice too fast (r = log 2). Without c the interval is
    [0, 0] and misses all of c; without a (or b) it spans [0, log 2] and holds a's runs: 10 of 15 inside."""
    runs = ([Residual("serial", "ddp", g, 0.0) for g in ("a", "b") for _ in range(5)]
            + [Residual("serial", "ddp", "c", math.log(2)) for _ in range(5)])
    held = held_out_coverage(runs, coverage=0.8, min_rows=10)
    assert held["by_group"]["c"]["share_inside"] == 0.0
    assert held["by_group"]["a"]["share_inside"] == held["by_group"]["b"]["share_inside"] == 1.0
    assert held["share_inside"] == pytest.approx(10 / 15) and held["runs"] == 15
    assert held["by_strategy"]["serial"] == {"runs": 15, "share_inside": pytest.approx(10 / 15)}
    assert in_sample_coverage(runs, error_quantiles(runs, 0.8, 10)) == 1.0  # [0, log 2] holds every run


def _dataset(path: Path, factors: dict[int, float]) -> None:
    """Serial runs of small_cnn2d at several widths and two batches, measured = predicted x factor[width]."""
    from calibrate.cost_model import load_cost_model
    from predictor.api import default_plans, load_model, predict

    cm, rows = load_cost_model(PROFILE), []
    for width, factor in factors.items():
        knobs = {"width": width, "image": 16}
        graph = load_model("small_cnn2d", **knobs)
        for batch in (4, 8):
            plan = default_plans(graph, "serial", batch, 1, 2)[0]
            pred = predict(graph, plan, cm, interval=False)
            rows.append({"label": "serial", "scenario": f"small_cnn2d/{width}/B{batch}", "model": "small_cnn2d",
                         "knobs": knobs, "measured_time_s": pred.iteration_s * factor,
                         "prediction": {"plan": dataclasses.asdict(plan)}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_command_learns_the_interval_and_writes_it(tmp_path, capsys):
    from calibrate.cost_model import load_cost_model
    from predictor.api import default_plans, load_model, predict
    from predictor.cli import main

    dataset, profile = tmp_path / "runs.jsonl", tmp_path / "p.yaml"
    profile.write_bytes(PROFILE.read_bytes())
    factors = {4: 1.0, 6: 1.25, 8: 1.5, 10: 1.75, 12: 2.0, 14: 2.25}
    _dataset(dataset, factors)
    assert main(["model-error", "--profile", str(profile), str(dataset), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 12
    # measured = factor x predicted: accuracy 1 - |1/f - 1| per run, two batches per width
    assert report["mean_accuracy"] == pytest.approx(sum(1 - abs(1 / f - 1) for f in factors.values()) / len(factors))
    assert report["least_accuracy"] == pytest.approx(1 / 2.25)  # factor 2.25: predicted 0.44 of the measured time
    ratios = sorted(math.log(f) for f in factors.values() for _ in range(2))
    import numpy as np
    q = round(float(np.quantile(np.abs(ratios), 0.8)), 4)
    assert report["quantiles"]["*"] == pytest.approx([-q, q], abs=1e-4)
    assert "model_error" not in load_cost_model(profile).coefficients.model_dump(exclude_none=True)
    assert main(["model-error", "--profile", str(profile), str(dataset), "--write"]) == 0
    assert "inside, held out by model" in capsys.readouterr().out
    cm = load_cost_model(profile)
    assert cm.coefficients.model_error.rows == 12
    graph = load_model("small_cnn2d", width=5, image=16)
    pred = predict(graph, default_plans(graph, "serial", 8, 1, 2)[0], cm)
    low, high = cm.model_error_bounds("serial", "ddp")
    assert pred.interval_s[1] >= pred.iteration_s * high * (1 - 1e-9) and high > 1.5  # widened by the runs' error


@pytest.mark.parametrize("argv, needle", [
    (["--coverage", "1.5"], "--coverage: expected a number between 0.5 and 0.99"),
    ([], "no run with a measured time and a feasible prediction"),
    (["--profile", "missing.yaml"], "missing.yaml"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path, argv, needle, capsys):
    from predictor.cli import main

    dataset = tmp_path / "runs.jsonl"
    dataset.write_text("")
    base = ["model-error", "--profile", str(PROFILE), str(dataset)]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
