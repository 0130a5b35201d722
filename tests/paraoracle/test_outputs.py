"""Outputs: checked before any work, never overwritten without --force, atomic, with the user's umask."""
from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from calibrate.correction_synthetic import synthetic_runs
from predictor.cli import main as predictor_main
from paraoracle.cli import profiler_main
from profiler.errors import UserError
from profiler.outputs import check_output, write_atomic
from profiler.profile import load_profile, save_profile

FIXTURE = "tests/data/drift_cpu_profile.yaml"
V100 = "v100-dgx1-8gpu.published"  # a shipped profile, by name


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_written_file_has_the_umask_mode_and_stray_temporaries_go(tmp_path):
    target = tmp_path / "p.yaml"
    stray = tmp_path / ".p.yaml.abc123.tmp"  # left by a killed writer (no live pid in its name)
    stray.write_text("half")
    old = os.umask(0o022)
    try:
        write_atomic(target, "x: 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not stray.exists() and target.read_text() == "x: 1\n"
    os.chmod(target, 0o640)
    write_atomic(target, b"x: 2\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # a replaced file keeps its mode


@pytest.mark.parametrize("name, needle", [("x" * 300 + ".png", "file name longer"), ("plot.jpg", "ending in")])
def test_bad_output_names_are_refused(tmp_path, name, needle):
    with pytest.raises(UserError, match=needle):
        check_output(tmp_path / name, "--plot", suffixes=(".png", ".pdf", ".svg"))


def test_output_over_a_device_is_refused():
    with pytest.raises(UserError, match="not a regular file"):
        check_output("/dev/null", "--out", force=True)


def _existing(tmp_path, name="existing.out"):
    path = tmp_path / name
    path.write_text("keep me\n")
    return path


@pytest.mark.parametrize("argv", [
    lambda t, e: ["profiler", "fit", FIXTURE, "--out", str(e)],
    lambda t, e: ["profiler", "history", FIXTURE, FIXTURE, "--plot", str(e)],
    lambda t, e: ["predictor", "run", "--profile", V100, "--model", "small_cnn2d", "--batch", "8", "--gpus", "2",
                  "--trace", str(e)],
    lambda t, e: ["predictor", "shapes", "--model", "small_cnn2d", "--batch", "8", "--gpus", "2", "--out", str(e)],
    lambda t, e: ["predictor", "validate", "--profile", V100, "--suite", "smoke", "--out", str(e)],
])
def test_existing_outputs_are_not_overwritten(tmp_path, capsys, argv):
    suffix = {"history": ".png", "shapes": ".yaml", "validate": ".jsonl"}
    args = argv(tmp_path, "E")
    existing = _existing(tmp_path, "existing" + next((v for k, v in suffix.items() if k in args), ".json"))
    args = argv(tmp_path, existing)
    main = profiler_main if args[0] == "profiler" else predictor_main
    before = _digest(existing)
    assert main(args[1:]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(existing) in err and "Traceback" not in err
    assert _digest(existing) == before


def _trained_pair(tmp_path):
    from tests.calibrate.test_correction import make_profile

    profile_path = tmp_path / "profile.yaml"
    save_profile(make_profile(), profile_path)
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in synthetic_runs(models=3, overhead_per_call_s=1e-3, seed=2)))
    return profile_path, runs


@pytest.mark.slow  # trains a correction
def test_train_correction_out_is_never_the_profile_and_leaves_it_alone(tmp_path, capsys):
    profile_path, runs = _trained_pair(tmp_path)
    before = _digest(profile_path)
    base = ["train-correction", "--profile", str(profile_path), "--runs", str(runs)]
    assert predictor_main(base + ["--out", str(profile_path)]) == 2
    assert "is the --profile file" in capsys.readouterr().err and _digest(profile_path) == before
    other = tmp_path / "elsewhere.json"
    assert predictor_main(base + ["--out", str(other)]) == 0
    assert other.exists() and _digest(profile_path) == before
    assert predictor_main(base + ["--out", str(other)]) == 2  # exists: --force needed
    assert predictor_main(base + ["--out", str(other), "--force", "--attach"]) == 0
    assert load_profile(profile_path).correction.path == "elsewhere.json"
    # retraining in place keeps a consistent pair, and the staged copy is gone
    assert predictor_main(base) == 0 and predictor_main(base) == 0
    assert load_profile(profile_path).correction.path == "profile.correction.json"
    assert not list(tmp_path.glob(".*.next"))


def test_validate_refuses_to_append_to_a_file_that_is_not_jsonl(tmp_path, capsys):
    not_jsonl = tmp_path / "notes.jsonl"
    not_jsonl.write_text("# my notes\nnot json\n")
    before = _digest(not_jsonl)
    assert predictor_main(["validate", "--profile", V100, "--suite", "smoke", "--out", str(not_jsonl)]) == 2
    assert "not valid JSON" in capsys.readouterr().err and _digest(not_jsonl) == before
