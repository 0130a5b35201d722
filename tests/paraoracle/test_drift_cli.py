"""`profiler drift OLD NEW`: exit codes 0/1/2, machine identity, --force, --json, causes in the output."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from paraoracle.cli import profiler_main as main
from profiler.profile import load_profile, save_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "drift_cpu_profile.yaml"


def _halves(tmp_path, *, scale_benchmark=None, scale=1.15, new_machine=None, new_threads=None):
    """Two profiles from the committed real profile: each point's samples split into two halves."""
    base = load_profile(DATA)
    old, new = base.model_copy(deep=True), base.model_copy(deep=True)
    rng = np.random.default_rng(5)
    for s_old, s_new in zip(old.samples, new.samples):
        times = rng.permutation(s_old.times_s)
        s_old.times_s = times[: len(times) // 2].tolist()
        factor = scale if s_new.benchmark == scale_benchmark else 1.0
        s_new.times_s = (times[len(times) // 2 :] * factor).tolist()
        if new_threads and s_new.benchmark == scale_benchmark:
            s_new.threads = new_threads
    new.created = "2026-12-01T00:00:00+00:00"
    for name, value in (new_machine or {}).items():
        setattr(new.machine, name, value)
    paths = tmp_path / "old.yaml", tmp_path / "new.yaml"
    save_profile(old, paths[0])
    save_profile(new, paths[1])
    return [str(p) for p in paths]


def test_unchanged_machine_exits_0(tmp_path, capsys):
    old, new = _halves(tmp_path)
    assert main(["drift", old, new, "--no-predict"]) == 0
    out = capsys.readouterr().out
    assert "nothing drifted" in out


def test_profiles_measured_at_other_thread_counts_are_refused_unless_forced(tmp_path, capsys):
    old, new = _halves(tmp_path, scale_benchmark="gemm", new_threads=1)
    assert main(["drift", old, new, "--no-predict"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "measured differently (benchmark threads" in err and "--force" in err


def test_degraded_family_exits_1_and_is_named(tmp_path, capsys):
    old, new = _halves(tmp_path, scale_benchmark="gemm", new_threads=1)
    assert main(["drift", old, new, "--no-predict", "--force"]) == 1
    out = capsys.readouterr().out
    drift_rows = [line for line in out.splitlines() if line.strip().startswith("DRIFT")]
    assert len(drift_rows) == 1 and "compute gemm float32 cpu" in drift_rows[0]
    change = float(drift_rows[0].split("%")[0].split()[-1])
    assert change == pytest.approx(-13.0, abs=2.0)  # 15% slower = throughput -13.0%
    assert "thread count change" in out


def test_json_output(tmp_path, capsys):
    old, new = _halves(tmp_path, scale_benchmark="stream", scale=1.3)
    assert main(["drift", old, new, "--json", "--no-predict"]) == 1
    doc = json.loads(capsys.readouterr().out)
    drifted = {f["family"] for f in doc["families"] if f["drifted"]}
    assert drifted == {"stream copy cpu", "stream triad cpu"}
    assert doc["drifted"] is True
    stream = next(f for f in doc["families"] if f["family"] == "stream copy cpu")
    assert stream["change_ci"][0] < stream["change"] < stream["change_ci"][1] < 0


def test_min_effect_raises_the_bar(tmp_path):
    old, new = _halves(tmp_path, scale_benchmark="gemm", scale=1.15)
    assert main(["drift", old, new, "--no-predict", "--min-effect", "0.3"]) == 0


def test_different_machines_refused_unless_forced(tmp_path, capsys):
    old, new = _halves(tmp_path, new_machine={"hostname": "other-node"})
    assert main(["drift", old, new, "--no-predict"]) == 2
    err = capsys.readouterr().err
    assert "different machines" in err and "other-node" in err and "--force" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["drift", old, new, "--no-predict", "--force"]) == 0
    assert "WARNING: different machines" in capsys.readouterr().out


def test_reference_workload_is_reported_or_skipped(tmp_path, capsys):
    old, new = _halves(tmp_path)
    main(["drift", old, new])
    out = capsys.readouterr().out
    assert "reference workload" in out
    assert "predicted iteration time" in out or "skipped:" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.yaml", "{new}"], "no such profile file"),
        (["{old}", "{new}", "--min-effect", "2"], "--min-effect"),
        (["{old}", "{new}", "--alpha", "0"], "--alpha"),
        (["{bad}", "{new}"], "corrupt YAML"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    old, new = _halves(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nmachine: [unclosed\n")
    argv = ["drift", *(a.format(old=old, new=new, bad=bad) for a in args), "--no-predict"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_no_common_points_exit_2(tmp_path, capsys):
    old, new = _halves(tmp_path)
    profile = load_profile(new)
    for s in profile.samples:
        s.params = {**s.params, "other": 1}
    save_profile(profile, new)
    assert main(["drift", old, new, "--no-predict"]) == 2
    assert "no benchmark point in common" in capsys.readouterr().err
