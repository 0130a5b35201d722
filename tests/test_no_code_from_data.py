"""A data file (a suite) may name zoo models and layer specs only: it never imports or runs Python code."""
from __future__ import annotations

import pytest

from predictor.api import load_model
from predictor.cli import main as predictor_main
from profiler.errors import UserError


def _suite(tmp_path, model: str, marker) -> str:
    path = tmp_path / "evil.yaml"
    path.write_text(f"runs:\n  - model: {model}\n    knobs: {{command: 'touch {marker}'}}\n"
                    "    batch: 2\n    ranks: 1\n    strategy: serial\n")
    return str(path)


@pytest.mark.parametrize("model", ["os:system", "subprocess:getoutput", "evil.py", "evil.py:model"])
@pytest.mark.parametrize("command", ["validate", "shapes"])
def test_suite_naming_code_is_refused_and_nothing_runs(tmp_path, capsys, model, command):
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\nmodel = None\n")
    suite = _suite(tmp_path, model, marker)
    argv = {"validate": ["validate", "--suite", suite, "--profile", "h200", "--out", str(tmp_path / "r.jsonl")],
            "shapes": ["shapes", "--suite", suite, "--out", str(tmp_path / "s.yaml")]}[command]
    code = predictor_main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "evil.yaml" in err and "Traceback" not in err
    assert not marker.exists()


def test_load_model_without_code_accepts_zoo_and_refuses_imports(tmp_path):
    assert load_model("small_cnn2d", allow_code=False, width=4, image=16).layers
    marker = tmp_path / "ran"
    with pytest.raises(UserError, match="zoo model"):
        load_model("os:system", allow_code=False, command=f"touch {marker}")
    assert not marker.exists()
