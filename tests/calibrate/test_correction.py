"""Residual correction: evaluator vs scikit-learn, recovery of a known residual, the per-strategy gate,
safe storage (another profile's correction refused, a tampered file refused), the CLI, the domain flag."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from calibrate.correction import (
    CANDIDATES,
    Correction,
    build_dataset,
    cross_validate,
    evaluate_model,
    export_model,
    fit_correction,
    load_correction,
    profile_identity,
    _make_estimator,
)
from calibrate.correction_features import NUMERIC_FEATURES, numeric_features, record_from_prediction, term_group
from calibrate.correction_synthetic import synthetic_runs
from predictor.cli import main as predictor_main
from profiler.errors import UserError
from profiler.profile import Machine, Profile, Provenance, Sample, load_profile, save_profile

OVERHEAD_PER_CALL_S = 1e-3


def make_profile(hostname: str = "node-a") -> Profile:
    return Profile(
        schema_version=1, machine=Machine(hostname=hostname, cpu_cores=2), created="2026-11-29T12:00:00+00:00",
        provenance=Provenance(kind="calibrated", source="test"),
        samples=[Sample(benchmark="gemm", device="cpu", threads=1, times_s=[1e-3, 1.1e-3], flops=2e6)],
        coefficients={"compute": {"gemm": {"fp32": 1.5e10}}},
    )


def write_runs(path, runs) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_runs(models=6, overhead_per_call_s=OVERHEAD_PER_CALL_S, seed=1)


@pytest.fixture(scope="module")
def trained_once(tmp_path_factory):
    """A profile on disk with a correction trained by the CLI for it (trained once per module)."""
    folder = tmp_path_factory.mktemp("trained")
    profile_path = folder / "profile.yaml"
    save_profile(make_profile(), profile_path)
    runs_path = folder / "runs.jsonl"
    write_runs(runs_path, synthetic_runs(models=3, overhead_per_call_s=OVERHEAD_PER_CALL_S, seed=2))
    assert predictor_main(["train-correction", "--profile", str(profile_path), "--runs", str(runs_path)]) == 0
    return folder


@pytest.fixture
def trained(trained_once, tmp_path):
    """A private copy of the trained profile and its correction (tests may tamper with it)."""
    for name in ("profile.yaml", "profile.correction.json"):
        shutil.copy(trained_once / name, tmp_path / name)
    return tmp_path / "profile.yaml"


@pytest.mark.parametrize("kind", CANDIDATES)
def test_exported_parameters_predict_like_sklearn(kind):
    rng = np.random.default_rng(0)
    numeric = rng.normal(size=(200, len(NUMERIC_FEATURES))) * np.geomspace(1e-3, 1e3, len(NUMERIC_FEATURES))
    indicators = np.eye(3)[rng.integers(0, 3, size=200)]  # three strategies, one-hot
    X = np.hstack([numeric, indicators])
    y = np.sin(X[:, 0]) + 0.01 * X[:, 3] - X[:, 1] * X[:, 2] + indicators @ np.array([0.1, -0.2, 0.3])
    estimator = _make_estimator(kind, seed=0).fit(X[:150], y[:150])
    params = json.loads(json.dumps(export_model(kind, estimator)))  # through plain JSON, as stored
    np.testing.assert_allclose(evaluate_model(params, X[150:]), estimator.predict(X[150:]), rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_fixed_overhead_per_collective_call_is_recovered(synthetic):
    report = cross_validate(build_dataset(synthetic))
    analytical, corrected, worst = report.headline
    assert 1 - corrected < 0.25 * (1 - analytical)  # held out, the correction removes most of the error...
    assert corrected > 0.97 and worst > 0.96  # ...on every strategy
    # fit on these models, apply to unseen models: the implied overhead per call is the true one
    spec, _ = fit_correction(synthetic, make_profile(), runs_source={})
    correction = Correction(spec=spec, path=None)
    fresh = synthetic_runs(models=3, overhead_per_call_s=OVERHEAD_PER_CALL_S, seed=7, model_prefix="unseen")
    busy = [r for r in fresh if r["true_overhead_s"] > 0.1 * r["predicted_time_s"]]
    per_call_s = [(correction.apply(r).corrected_s - r["predicted_time_s"]) / r["collective_calls"] for r in busy]
    assert len(busy) > 20
    assert np.median(per_call_s) == pytest.approx(OVERHEAD_PER_CALL_S, rel=0.15)


def test_gate_never_lets_the_correction_hurt_a_strategy():
    runs = synthetic_runs(models=4, overhead_per_call_s=OVERHEAD_PER_CALL_S, noise=0.0, seed=3)
    for r in runs:  # the analytical model is exact for pipeline: any correction there can only hurt
        if r["strategy"] == "pipeline":
            r["measured_time_s"] = r["predicted_time_s"]
    report = cross_validate(build_dataset(runs))
    rows = {row.strategy: row for row in report.strategies}
    assert rows["pipeline"].analytical == pytest.approx(1.0)
    for row in rows.values():
        assert all(v >= row.analytical - 1e-12 for v in row.corrected.values()), row
    assert rows["spatial"].enabled and min(rows["spatial"].corrected.values()) > rows["spatial"].analytical + 0.05


def test_trained_correction_loads_and_applies(trained):
    profile = load_profile(trained)
    assert profile.correction is not None and profile.correction.path == "profile.correction.json"
    correction = load_correction(profile, trained)
    runs = synthetic_runs(models=1, overhead_per_call_s=OVERHEAD_PER_CALL_S, seed=2)
    run = next(r for r in runs if r["strategy"] == "spatial" and r["true_overhead_s"] > 0.1 * r["predicted_time_s"])
    result = correction.apply(run)
    assert result.applied and result.in_domain and result.reasons == ()
    assert abs(result.corrected_s - run["measured_time_s"]) < abs(result.analytical_s - run["measured_time_s"])


def test_correction_for_another_profile_is_refused(trained, tmp_path):
    other = make_profile(hostname="node-b")
    other.correction = load_profile(trained).correction
    other_path = tmp_path / "other.yaml"
    save_profile(other, other_path)  # same folder, so the reference resolves to the same file
    with pytest.raises(UserError, match="trained for another profile"):
        load_correction(load_profile(other_path), other_path)


def test_tampered_correction_is_refused(trained):
    path = trained.parent / "profile.correction.json"
    data = json.loads(path.read_text())
    data["enabled"] = {s: True for s in data["enabled"]}
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="sha256 does not match .* tampered"):
        load_correction(load_profile(trained), trained)


def test_malformed_file_with_matching_hash_is_refused_not_evaluated(trained):
    """Someone who also edits the profile's hash still cannot make the evaluator loop or index wildly."""
    import hashlib

    path = trained.parent / "profile.correction.json"
    data = json.loads(path.read_text())
    tree = {"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
            "threshold": [0.5, -2.0, -2.0], "value": [0.0, 0.1, 0.2]}
    bad_models = [
        {"kind": "trees", "base": 0.0, "weight": 1.0, "trees": [dict(tree, children_left=[0, -1, -1])]},  # a cycle
        {"kind": "trees", "base": 0.0, "weight": 1.0, "trees": [dict(tree, feature=[-5, -2, -2])]},  # bad index
        {"kind": "trees", "base": 0.0, "weight": 1.0, "trees": [dict(tree, value=[0.0, 0.1])]},  # ragged
        dict(data["model"], coef=[1.0]) if data["model"]["kind"] == "ridge" else {"kind": "ridge"},
    ]
    profile = load_profile(trained)
    text = json.dumps(dict(data, model={"kind": "trees", "base": 0.0, "weight": 1.0, "trees": [tree]}))
    path.write_text(text)
    profile.correction.sha256 = hashlib.sha256(text.encode()).hexdigest()
    assert load_correction(profile, trained).spec.model.trees[0].value == [0.0, 0.1, 0.2]  # the well-formed one loads
    for model in bad_models:
        text = json.dumps(dict(data, model=model))
        path.write_text(text)
        profile.correction.sha256 = hashlib.sha256(text.encode()).hexdigest()
        with pytest.raises(UserError, match="not a valid correction file"):
            load_correction(profile, trained)
    text = "[" * 100000 + "]" * 100000  # nesting deep enough to exhaust the JSON parser's recursion
    path.write_text(text)
    profile.correction.sha256 = hashlib.sha256(text.encode()).hexdigest()
    with pytest.raises(UserError, match="not a valid correction file"):
        load_correction(profile, trained)


def test_profile_identity_ignores_the_reference_and_survives_a_round_trip(trained):
    profile = load_profile(trained)
    assert profile.correction is not None
    without = profile.model_copy(update={"correction": None})
    assert profile_identity(profile) == profile_identity(without)
    assert profile_identity(profile) != profile_identity(make_profile(hostname="node-b"))


def test_out_of_domain_is_flagged_and_clamped(trained):
    correction = load_correction(load_profile(trained), trained)
    run = dict(synthetic_runs(models=1, seed=2)[0], devices=64, devices_per_node=64)
    result = correction.apply(run)
    assert not result.in_domain and any("log2_devices" in r for r in result.reasons)
    assert math.isfinite(result.corrected_s)
    unseen = correction.apply(dict(run, strategy="data+filter"))
    assert not unseen.applied and unseen.corrected_s == unseen.analytical_s
    assert any("data+filter" in r for r in unseen.reasons)


def test_cli_bad_runs_is_one_line_exit_2(tmp_path, capsys):
    profile_path = tmp_path / "p.yaml"
    save_profile(make_profile(), profile_path)
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"strategy": "data", "predicted_time_s": 1.0, "measured_time_s": 1.1}\n{"strategy": "data", "predicted_time_s": -1, "measured_time_s": 1.0}\n')
    assert predictor_main(["train-correction", "--profile", str(profile_path), "--runs", str(runs)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "runs.jsonl:2" in err and "predicted_time_s" in err
    assert load_profile(profile_path).correction is None


def test_cli_one_group_only_is_refused(tmp_path, capsys):
    profile_path = tmp_path / "p.yaml"
    save_profile(make_profile(), profile_path)
    runs = tmp_path / "runs.jsonl"
    write_runs(runs, [dict(r, model="one", scenario="one") for r in synthetic_runs(models=1)])
    assert predictor_main(["train-correction", "--profile", str(profile_path), "--runs", str(runs)]) == 2
    assert "at least 2 models or 2 scenarios" in capsys.readouterr().err


def test_features_from_a_prediction_record():
    from predictor.plan import Plan, Prediction

    plan = Plan(strategy="data+spatial", batch=32, devices=8, devices_per_node=4, p_data=2, p_spatial=4,
                spatial_split=(2, 2))
    prediction = Prediction(plan=plan, compute_fwd_s=1.0, compute_bwd_s=2.0, update_s=0.5,
                            comm_exposed_s={"gradient": 0.25, "halo": 0.25}, comm_hidden_s={"gradient": 0.5}).finish()
    record = record_from_prediction(prediction.to_dict(), model="net", threads=2)
    features = numeric_features(record)
    assert record["nodes"] == 2 and record["batch_per_device"] == 16
    assert features["frac_compute"] == pytest.approx(3.0 / 4.0)
    assert features["frac_gradient"] == pytest.approx(0.25 / 4.0)
    assert features["frac_halo"] == pytest.approx(0.25 / 4.0)
    assert features["frac_hidden"] == pytest.approx(0.5 / 4.0)
    assert features["comm_over_compute"] == pytest.approx(0.5 / 3.0)
    assert features["log2_p_spatial"] == pytest.approx(2.0)
    assert set(features) == set(NUMERIC_FEATURES)
    assert term_group("comm_redistribute_s") == "redistribute" and term_group("allgather_s") == "layer_collective"


def test_predictor_glue_applies_the_profile_correction(trained):
    from predictor.corrected import corrected_times, prediction_record
    from predictor.graph import Layer, ModelGraph
    from predictor.plan import Plan, Prediction

    graph = ModelGraph(name="tiny", input_shape=(3, 8, 8), layers=(
        Layer("conv", "conv2d", (3, 8, 8), (4, 8, 8), weight_shape=(4, 3, 3, 3), params=112, kernel=(3, 3),
              stride=(1, 1), padding=(1, 1), flops_fwd=1e5, flops_bwd_data=1e5, flops_bwd_weight=1e5),))
    plan = Plan(strategy="spatial", batch=16, devices=4, devices_per_node=4, p_spatial=4, spatial_split=(2, 2))
    feasible = Prediction(plan=plan, compute_fwd_s=0.1, compute_bwd_s=0.2, comm_exposed_s={"halo": 0.05}).finish()
    infeasible = Prediction(plan=plan, feasible=False, reason="infeasible: test").finish()
    record = prediction_record(feasible, graph, threads=1)
    assert record["model"] == "tiny" and record["model_summary"] == {"layers": 1, "flops_per_sample": 3e5, "param_bytes": 448,
                                                         "input_shape": [3, 8, 8]}
    features = numeric_features(dict(record, threads=2, cpu_count=4))
    assert features["collective_calls_per_s"] == pytest.approx(2 / 0.35)  # one halo exchange fwd + one bwd
    assert features["cpu_oversubscription"] == pytest.approx(4 * 2 / 4)
    assert corrected_times([feasible], graph, make_profile()) is None  # no correction in the profile
    profile = load_profile(trained)
    first, second = corrected_times([feasible, infeasible], graph, profile, trained, threads=1)
    assert second is None
    assert first.analytical_s == pytest.approx(0.35) and first.applied
    assert not first.in_domain  # a 1-layer model is far outside the synthetic training runs


def test_runs_without_a_prediction_are_skipped(tmp_path):
    from calibrate.correction import read_runs

    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"strategy": "data", "predicted_time_s": 1.0, "measured_time_s": 1.1}\n'
                    '{"strategy": "spatial", "predicted_time_s": null, "measured_time_s": 1.0}\n\n')
    records, skipped = read_runs(runs)
    assert [r["strategy"] for r in records] == ["data"] and skipped == 1


def test_estimated_collective_calls():
    from calibrate.correction_features import estimated_collective_calls

    summary = {"layers": 10, "param_bytes": 60e6}
    assert estimated_collective_calls({"plan": {"p_data": 4}, "model_summary": summary}) == 3  # 25 MB buckets
    assert estimated_collective_calls({"plan": {"p_filter": 2}, "model_summary": summary}) == 20
    assert estimated_collective_calls({"plan": {"stages": 4, "micro_batches": 8}, "model_summary": summary}) == 16
    assert estimated_collective_calls({"plan": {}, "model_summary": summary}) == 0


def test_correction_table_flags_out_of_domain():
    from rich.console import Console

    from calibrate.correction import CorrectedTime
    from predictor.corrected import correction_rows, correction_table
    from predictor.plan import Plan, Prediction

    plan = Plan(strategy="data", batch=8, devices=2, devices_per_node=2, p_data=2)
    preds = [Prediction(plan=plan, compute_fwd_s=1.0).finish()] * 2
    results = [CorrectedTime(1.0, 1.2, True, True, ()), CorrectedTime(1.0, 1.0, False, False, ("log2_devices=6 outside",))]
    rows = correction_rows(preds, results)
    assert [r["corrected_s"] for r in rows] == [1.2, 1.0] and rows[1]["notes"] == ["log2_devices=6 outside"]
    console = Console(width=200, record=True)
    console.print(correction_table(rows))
    text = console.export_text()
    assert "1.2 s" in text and "OUT" in text and "not applied" in text


def test_predictor_run_shows_corrected_figure_and_refuses_tampered_file(tmp_path, capsys):
    from calibrate.shipped import shipped_profiles

    source = shipped_profiles("*.published.yaml")
    assert source, "calibrate/profiles/*.published.yaml: the shipped reference profiles are missing"
    profile_path = tmp_path / "ref.yaml"
    shutil.copy(source[0], profile_path)
    runs = tmp_path / "runs.jsonl"
    write_runs(runs, synthetic_runs(models=2, overhead_per_call_s=OVERHEAD_PER_CALL_S, seed=5))
    assert predictor_main(["train-correction", "--profile", str(profile_path), "--runs", str(runs)]) == 0
    capsys.readouterr()
    argv = ["run", "--profile", str(profile_path), "--model", "small_cnn2d", "--batch", "32", "--gpus", "2",
            "--strategy", "spatial"]
    assert predictor_main(argv) == 0
    out = capsys.readouterr().out
    assert "residual correction" in out and "analytical" in out and "corrected" in out and "OUT" in out
    correction_path = tmp_path / "ref.correction.json"
    correction_path.write_text(correction_path.read_text().replace('"enabled": {', '"enabled": {"x": true, ', 1))
    assert predictor_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "tampered" in err


def test_runs_predicted_with_another_profile_are_refused():
    runs = synthetic_runs(models=2, seed=4)
    mine, other = make_profile(), make_profile(hostname="node-b")
    runs[3]["profile_identity"] = profile_identity(other)
    with pytest.raises(UserError, match="1 of 60 runs were predicted with another profile"):
        fit_correction(runs, mine, runs_source={})


def test_accuracy_optimal_factor_maximises_mean_accuracy():
    from calibrate.correction import accuracy, accuracy_optimal_factor

    rng = np.random.default_rng(11)
    for _ in range(5):
        ratios = np.exp(rng.normal(1.0, 0.8, size=int(rng.integers(1, 12))))
        best = accuracy_optimal_factor(ratios)
        grid = np.geomspace(ratios.min() / 2, ratios.max() * 2, 4001)
        scores = [accuracy(f * np.ones_like(ratios), ratios).mean() for f in grid]
        assert accuracy(best * np.ones_like(ratios), ratios).mean() >= max(scores) - 1e-12
