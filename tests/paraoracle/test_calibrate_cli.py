"""`profiler calibrate` end to end on CPU: a tiny calibration, every bad input (one line on stderr, exit 2,
no traceback), the store's no-overwrite rules, and Ctrl-C / in-section failures leaving PATH.partial.
`profiler` is the command users run (paraoracle.cli, `python -m paraoracle.cli`); `python -m profiler` is the
profiler stage alone, which measures without fitting."""
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from paraoracle import calibrate_model
from paraoracle.cli import profiler_main as main
from profiler import store
from profiler.cli import main as stage_main
from profiler.cmd_calibrate import fit_or_warn, parse_sections
from profiler.errors import UserError
from profiler.profile import load_profile
from tests.interrupts import interruptible

# spawns processes or ranks, or profiles real training steps: not in the fast inner loop (-m "not slow")
pytestmark = pytest.mark.slow

TINY = {**os.environ, "PARAORACLE_GRID": "tiny", "PYTHONUNBUFFERED": "1"}


def cli(*args, env=TINY, timeout=240):
    return subprocess.run([sys.executable, "-m", "paraoracle.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def assert_one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_tiny_calibration_writes_a_fitted_profile(tmp_path):
    out = tmp_path / "tiny.yaml"
    r = cli("calibrate", "--device", "cpu", "--out", str(out))
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    kinds = {s.benchmark for s in profile.samples}
    assert {"gemm", "conv2d", "conv3d", "batchnorm", "relu", "maxpool", "add", "stream", "alloc", "framework",
            "input"} <= kinds
    assert profile.provenance.kind == "calibrated"
    assert profile.settings["grid"] == "tiny" and profile.settings["sections"] == ["compute", "memory", "input", "collectives"]
    assert "skipped" in profile.settings["collectives"]
    assert profile.coefficients and profile.coefficients["framework"]  # calibrate.fit ran
    assert profile.coefficients["input_pipeline"]["per_sample_core_s"]["value"] > 0
    assert profile.coefficients["first_touch"]["threshold_bytes"] > 0
    ops = [s for s in profile.samples if s.benchmark not in ("stream", "alloc", "framework", "input")]  # swept twice
    first, second = ([s for s in ops if s.extra["pass"] == p] for p in (1, 2))
    assert len(first) + len(second) == len(ops) and profile.settings["compute_passes"] == 2
    assert [(s.benchmark, s.variant, s.params) for s in first] == [(s.benchmark, s.variant, s.params) for s in second]
    assert not any("pass" in s.extra for s in profile.samples if s.benchmark == "framework")
    assert all(s.flops is not None and s.bytes_moved > 0 for s in profile.samples
               if s.benchmark not in ("stream", "alloc", "framework", "input"))
    assert not store.partial_path(out).exists()


def test_ranks_time_compute_with_each_ranks_share_of_the_cores(tmp_path):
    """R ranks training on this host get cores // R threads each; the compute samples are timed so (the
    collectives' spawned ranks use the same rule), and --threads overrides it."""
    share = max(1, min(torch.get_num_threads(), (os.cpu_count() or 1) // 2))
    runs = {"share": ("--ranks", "2"), "flag": ("--ranks", "2", "--threads", "3")}
    for name, flags in runs.items():
        out = tmp_path / f"{name}.yaml"
        r = cli("calibrate", "--device", "cpu", "--only", "compute", *flags, "--out", str(out))
        assert r.returncode == 0, r.stderr
        profile = load_profile(out)
        expected = share if name == "share" else 3
        assert profile.settings["threads"] == expected
        assert profile.settings["threads_source"] == ("cores // --ranks 2" if name == "share" else "--threads")
        assert {s.threads for s in profile.samples} == {expected}


@pytest.mark.parametrize("value", ["0", "two"])
def test_bad_threads_flag_is_named(tmp_path, value):
    assert_one_line_error(cli("calibrate", "--device", "cpu", "--threads", value, "--out", str(tmp_path / "x.yaml")),
                          "--threads")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_device_cuda_without_gpu(tmp_path):
    assert_one_line_error(cli("calibrate", "--device", "cuda", "--out", str(tmp_path / "x.yaml")), "--device cuda")


@pytest.mark.parametrize("out", ["/proc/paraoracle-test.yaml", "/nonexistent-folder/x.yaml"])
def test_unwritable_out_fails_before_benchmarking(out):
    assert_one_line_error(cli("calibrate", "--device", "cpu", "--out", out), "--out")


def test_unknown_only_item_is_named(tmp_path):
    assert_one_line_error(cli("calibrate", "--device", "cpu", "--only", "compute,gpus", "--out", str(tmp_path / "x.yaml")),
                          "--only", "gpus")


def test_existing_file_refused_without_force(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PARAORACLE_GRID", "tiny")
    out = tmp_path / "p.yaml"
    out.write_text("keep me")
    assert main(["calibrate", "--device", "cpu", "--only", "memory", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--force" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "keep me"
    assert main(["calibrate", "--device", "cpu", "--only", "memory", "--force", "--out", str(out)]) == 0
    assert {s.benchmark for s in load_profile(out).samples} == {"stream", "alloc"}


def test_folder_out_gets_a_timestamped_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_GRID", "tiny")
    assert main(["calibrate", "--device", "cpu", "--only", "memory", "--out", str(tmp_path)]) == 0
    assert main(["calibrate", "--device", "cpu", "--only", "memory", "--out", str(tmp_path)]) == 0
    files = sorted(tmp_path.glob("*.yaml"))
    assert len(files) == 2  # the second run, in the same second, did not overwrite the first
    assert all(load_profile(f).samples for f in files)


def test_store_names_and_refusals(tmp_path):
    import datetime as dt

    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert store.timestamped_name("gpu node/1", when) == "gpu_node_1-20260102T030405Z.yaml"
    first = store.resolve_out(tmp_path, "h", False, when)
    assert first == tmp_path / "h-20260102T030405Z.yaml"
    first.write_text("x")
    assert store.resolve_out(tmp_path, "h", False, when).name == "h-20260102T030405Z-2.yaml"
    with pytest.raises(UserError, match="exists"):
        store.resolve_out(first, "h", False)
    assert store.resolve_out(first, "h", True) == first
    assert store.partial_path(first).name == "h-20260102T030405Z.yaml.partial"


def test_parse_sections():
    assert parse_sections(None, "cpu") == ["compute", "memory", "input", "collectives"]
    assert parse_sections(None, "cuda") == ["compute", "memory", "input", "host_device", "collectives"]
    assert parse_sections("memory, compute", "cpu") == ["compute", "memory"]
    with pytest.raises(UserError, match="host_device"):
        parse_sections("host_device", "cpu")
    with pytest.raises(UserError, match="at least one"):
        parse_sections(",", "cpu")


def test_ctrl_c_leaves_the_samples_in_partial(tmp_path):
    out = tmp_path / "int.yaml"
    env = {k: v for k, v in TINY.items() if k != "PARAORACLE_GRID"}  # the quick grid runs long enough
    proc = subprocess.Popen([sys.executable, "-m", "paraoracle.cli", "calibrate", "--device", "cpu", "--quick",
                             "--only", "compute", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=interruptible)
    first_line = proc.stderr.readline()  # the plan line: benchmarking starts right after it
    assert "compute" in first_line, first_line
    time.sleep(10)  # the quick grid's compute takes about 30 s alone; on a loaded CI machine 4 s held no sample yet
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr.strip().splitlines()[-1]
    partial = load_profile(store.partial_path(out))
    assert partial.samples and partial.settings["interrupted"] is True
    assert not out.exists()


def test_bad_collectives_flag_fails_before_any_section_runs(tmp_path):
    out = tmp_path / "early.yaml"
    r = cli("calibrate", "--device", "cpu", "--only", "memory,collectives", "--ranks", "2",
            "--collectives", "nosuchop", "--out", str(out))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "nosuchop" in r.stderr.strip().splitlines()[-1]
    assert not out.exists() and not store.partial_path(out).exists()


def test_failure_inside_a_section_leaves_partial_and_exits_2(tmp_path):
    out = tmp_path / "fail.yaml"
    # rank 1 dies in its first allgather, after the memory section and the allreduce sweep have measured
    env = {**TINY, "PARAORACLE_FAULT": "rank:1,op:allgather,mode:exit"}
    r = cli("calibrate", "--device", "cpu", "--only", "memory,collectives", "--ranks", "2",
            "--collectives", "allreduce,allgather", "--out", str(out), env=env)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "collectives section" in last and "allgather" in last and ".partial" in last
    partial = load_profile(store.partial_path(out))
    assert {s.benchmark for s in partial.samples} == {"stream", "alloc", "allreduce"}
    assert not out.exists()


def test_fit_failure_only_warns(tmp_path, capsys):
    from rich.console import Console

    from profiler.cmd_calibrate import Calibration
    from profiler.metadata import collect_machine

    empty = Calibration(machine=collect_machine("cpu"), created="2026-01-01T00:00:00+00:00", settings={}).profile()
    kept = fit_or_warn(empty, tmp_path / "x.yaml", Console(stderr=True), calibrate_model.fit)
    assert kept == empty and not kept.coefficients
    assert "fit skipped" in capsys.readouterr().err


def test_a_point_the_backend_cannot_run_is_recorded_and_skipped(tmp_path):
    import argparse

    from rich.console import Console

    from profiler.cases import BenchCase
    from profiler.cmd_calibrate import Calibration, run_sections
    from profiler.metadata import collect_machine

    def unsupported():
        raise RuntimeError("no kernel image is available for execution on the device\nmore detail")

    good = BenchCase("add", "fwd", {"N": 1, "C": 1, "H": 2, "W": 2}, "float32", 4, 48, lambda: (lambda: None))
    bad = BenchCase("relu", "fwd", {"N": 1, "C": 1, "H": 2, "W": 2}, "float32", 4, 32, unsupported)
    cal = Calibration(machine=collect_machine("cpu"), created="2026-01-01T00:00:00+00:00",
                      settings={"sections_started": []})
    args = argparse.Namespace(quick=True)
    console = Console(stderr=True, record=True)
    run_sections(cal, {"compute": [bad, good]}, ["compute"], args, "cpu", console)
    assert [(s.benchmark, s.extra["pass"]) for s in cal.samples] == [("add", 1), ("add", 2)]
    assert console.export_text().count(": skipped (") == 1  # not tried again in the second pass
    assert cal.settings["failed_points"] == {bad.label: "no kernel image is available for execution on the device"}


def test_ctrl_c_while_fitting_keeps_every_sample_unfitted(tmp_path, monkeypatch, capsys):
    from profiler import cmd_calibrate

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setenv("PARAORACLE_GRID", "tiny")
    monkeypatch.setattr(cmd_calibrate, "fit_or_warn", interrupted)
    out = tmp_path / "p.yaml"
    assert main(["calibrate", "--device", "cpu", "--only", "memory", "--out", str(out)]) == 130
    profile = load_profile(out)
    assert len(profile.samples) == profile.settings["points"]["memory"] and not profile.coefficients
    assert "profiler fit" in capsys.readouterr().err


def test_the_profiler_stage_alone_measures_without_fitting(tmp_path, monkeypatch, capsys):
    """`python -m profiler calibrate` imports no later stage: the samples are written, not fitted."""
    monkeypatch.setenv("PARAORACLE_GRID", "tiny")
    out = tmp_path / "p.yaml"
    assert stage_main(["calibrate", "--device", "cpu", "--only", "memory", "--out", str(out)]) == 0
    profile = load_profile(out)
    assert len(profile.samples) == profile.settings["points"]["memory"] and not profile.coefficients
    assert f"not fitted: `profiler fit {out}`" in capsys.readouterr().out
