"""`profiler calibrate --model M --batch B --gpus P ...` (paraoracle/calibrate_model.py): `predictor shapes` and
`profiler calibrate --shapes` in one step. Flag errors are one line and exit 2 before anything runs; the
calibration gets exactly the shapes file `predictor shapes` writes for the same request; the profile records
the request."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paraoracle import calibrate_model
from paraoracle.cli import PROFILER_COMMANDS, profiler_main
from predictor.cli import main as predictor_main
from profiler import cli as profiler_cli
from profiler import cmd_calibrate
from profiler.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
TINY = {**os.environ, "PARAORACLE_GRID": "tiny", "PYTHONUNBUFFERED": "1"}
SMALL = ["--model", "small_cnn2d", "--model-arg", "width=4", "--model-arg", "image=16", "--batch", "4", "--gpus", "2"]


@pytest.fixture
def calls(monkeypatch):
    """cmd_calibrate.run replaced by a recorder of its args, of the shapes file it was given (read while the
    temporary file still exists) and of the fit it was given."""
    seen = []

    def fake_run(args, fit=None):
        text = Path(args.shapes).read_text(encoding="utf-8") if args.shapes else None
        seen.append((args, text, fit))
        return 0

    monkeypatch.setattr(cmd_calibrate, "run", fake_run)
    return seen


@pytest.mark.parametrize("extra, needle", [
    (["--batch", "4"], "--batch: only with --model"),
    (["--gpus", "2"], "--gpus: only with --model"),
    (["--strategy", "data"], "--strategy: only with --model"),
    (["--model-arg", "width=4"], "--model-arg: only with --model"),
    (["--batch", "4", "--gpus", "2"], "--batch, --gpus: only with --model"),
    ([*SMALL, "--shapes", "s.yaml"], "--model and --shapes: give one"),
    (["--model", "small_cnn2d", "--batch", "4"], "--model needs --batch and --gpus"),
    (["--model", "no_such_model", "--batch", "4", "--gpus", "2"], "unknown model 'no_such_model'"),
    ([*SMALL, "--only", "memory"], "add compute to --only"),
    ([*SMALL, "--strategy", "bogus"], "argument --strategy: invalid choice"),
])
def test_flag_errors_are_one_line_exit_2_before_any_calibration(tmp_path, capsys, calls, extra, needle):
    code = profiler_main(["calibrate", "--device", "cpu", "--out", str(tmp_path / "p.yaml"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not calls and not (tmp_path / "p.yaml").exists()


def test_existing_out_fails_before_the_model_is_traced(tmp_path, capsys, calls, monkeypatch):
    out = tmp_path / "p.yaml"
    out.write_text("keep")
    monkeypatch.setattr(calibrate_model, "write_model_shapes", lambda *a: pytest.fail("traced the model"))
    assert profiler_main(["calibrate", "--device", "cpu", *SMALL, "--out", str(out)]) == 2
    assert "pass --force" in capsys.readouterr().err and out.read_text() == "keep" and not calls


@pytest.mark.slow  # spawns the installed console script
def test_console_entry_errors_without_traceback_and_light_help(tmp_path):
    """The installed `profiler` script runs paraoracle.cli:profiler_main (pyproject.toml); a flag error through it
    is one line, and --help shows the model flags without loading the predictor's model code."""
    project = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+; the project supports 3.10)
    assert '\nprofiler = "paraoracle.cli:profiler_main"\n' in project and '"paraoracle*"' in project
    script = Path(sys.executable).parent / "profiler"
    entry = [str(script)] if script.exists() else [sys.executable, "-m", "paraoracle.cli"]
    r = subprocess.run([*entry, "calibrate", "--device", "cpu", "--gpus", "2", "--out", str(tmp_path / "p.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "profiler calibrate: error: --gpus: only with --model " \
                                                     "(the model whose own layers to measure)"
    code = ("import sys; from paraoracle.cli import profiler_main; profiler_main(['calibrate', '--help']); "
            "print(sorted(m for m in sys.modules if m.startswith('predictor')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for flag in ("--model MODEL", "--model-arg KEY=VALUE", "--batch BATCH", "--gpus GPUS", "--strategy {all,",
                 "--shapes FILE", "--quick"):
        assert flag in r.stdout
    loaded = eval(r.stdout.strip().splitlines()[-1])  # noqa: S307 - our own print of a list of names
    assert "predictor.cmd_shapes" not in loaded and "predictor.api" not in loaded


def test_the_profiler_stage_alone_names_the_profiler_command(capsys):
    """`python -m profiler` only measures; asked for a command that reads profiles with later stages, it names
    the `profiler` command (paraoracle.cli), which offers every one of them."""
    assert set(PROFILER_COMMANDS) == {*profiler_cli.COMMANDS, *profiler_cli.COMPOSED}
    for name in profiler_cli.COMPOSED:
        assert profiler_cli.main([name, "x.yaml"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"run `profiler {name} ...`" in err


def test_without_model_the_calibration_is_unchanged(tmp_path, calls):
    assert profiler_main(["calibrate", "--device", "cpu", "--quick", "--out", str(tmp_path / "p.yaml")]) == 0
    (args, text, fit), = calls
    assert args.shapes is None and text is None and not hasattr(args, "shapes_request") and args.quick
    assert fit is calibrate_model.fit  # the profiler stage measures; the `profiler` command fits


def test_model_passes_the_shapes_predictor_writes(tmp_path, calls, capsys):
    reference = tmp_path / "reference.yaml"
    assert predictor_main(["shapes", *SMALL, "--strategy", "data", "--out", str(reference)]) == 0
    out = tmp_path / "p.yaml"
    assert profiler_main(["calibrate", "--device", "cpu", "--only", "compute", *SMALL, "--strategy", "data",
                          "--out", str(out)]) == 0
    (args, text, fit), = calls
    assert fit is calibrate_model.fit
    assert text == reference.read_text(encoding="utf-8")  # the same file, header included
    assert not Path(args.shapes).exists()  # temporary: removed after the calibration
    entries = yaml.safe_load(text)["shapes"]
    request = args.shapes_request
    assert request["model"] == "small_cnn2d" and request["model_args"] == ["width=4", "image=16"]
    assert (request["batch"], request["gpus"], request["strategy"], request["dtype"]) == (4, 2, "data", "fp32")
    assert request["shapes"] == len(entries) and request["recorded_by"].startswith("predictor shapes: model small_cnn2d")
    assert args.only == "compute" and args.out == str(out)
    assert f"--model small_cnn2d: {len(entries)} shapes" in capsys.readouterr().err


def test_every_model_flag_reaches_predictor_shapes(tmp_path):
    args = calibrate_model.OneLineParser(prog="t")
    calibrate_model.add_arguments(args)
    parsed = args.parse_args(["--out", "p.yaml", *SMALL, "--strategy", "filter", "--gpus-per-node", "2",
                              "--dtype", "bf16", "--input-shape", "3,16,16"])
    shapes = calibrate_model.shapes_args(parsed, tmp_path / "s.yaml")
    assert (shapes.model, shapes.batch, shapes.gpus, shapes.strategy) == ("small_cnn2d", 4, 2, "filter")
    assert (shapes.gpus_per_node, shapes.dtype, shapes.input_shape) == (2, "bf16", "3,16,16")
    assert shapes.model_arg == ["width=4", "image=16"] and shapes.out == str(tmp_path / "s.yaml")
    assert shapes.suite is None and shapes.profile is None


def test_launcher_worker_ranks_skip_the_model(tmp_path, calls, monkeypatch):
    """Under torchrun/srun every rank runs the command; only rank 0 records and measures the shapes."""
    monkeypatch.setattr(calibrate_model.collectives, "is_worker_rank", lambda: True)
    monkeypatch.setattr(calibrate_model, "write_model_shapes", lambda *a: pytest.fail("a worker traced the model"))
    assert profiler_main(["calibrate", "--device", "cpu", *SMALL, "--out", str(tmp_path / "p.yaml")]) == 0
    (args, text, _), = calls
    assert args.shapes is None and text is None


@pytest.mark.slow  # a calibration in a subprocess
def test_calibrate_model_end_to_end(tmp_path):
    out, reference = tmp_path / "p.yaml", tmp_path / "reference.yaml"
    r = subprocess.run([sys.executable, "-m", "paraoracle.cli", "calibrate", "--device", "cpu", "--only", "compute",
                        *SMALL, "--strategy", "data", "--out", str(out)],
                       capture_output=True, text=True, env=TINY, timeout=600)
    assert r.returncode == 0, r.stderr
    assert predictor_main(["shapes", *SMALL, "--strategy", "data", "--out", str(reference)]) == 0
    entries = yaml.safe_load(reference.read_text())["shapes"]
    profile = load_profile(out)
    recorded = profile.settings["shapes_file"]
    assert recorded["points"] >= len(entries) and "path" not in recorded
    assert {k: recorded["model"][k] for k in ("model", "model_args", "batch", "gpus", "strategy", "shapes")} == \
        {"model": "small_cnn2d", "model_args": ["width=4", "image=16"], "batch": 4, "gpus": 2, "strategy": "data",
         "shapes": len(entries)}
    assert "--model small_cnn2d" in profile.settings["command"]
    measured = {(s.benchmark, tuple(sorted(s.params.items()))) for s in profile.samples
                if s.extra.get("source") == "shapes file"}
    assert {(e["op"], tuple(sorted(e["params"].items()))) for e in entries} <= measured
    assert profile.coefficients["measured_shapes"]
