"""`predictor run` / `predictor search` end to end on the shipped V100 reference profile, and bad input
(one line on stderr, exit 2)."""
import json
from pathlib import Path

import pytest
import yaml

from calibrate.shipped import shipped_profile
from predictor.cli import main
from predictor.plan import STRATEGIES

V100 = str(shipped_profile("v100-abci-4gpu.published"))


def test_run_all_strategies_prints_ranked_table(capsys):
    assert main(["run", "--profile", V100, "--model", "resnet50", "--batch", "64", "--gpus", "64",
                 "--strategy", "all", "--dataset-size", "1281167"]) == 0
    out = capsys.readouterr().out
    assert "v100-abci-4gpu.published.yaml" in out
    for name in ("data", "spatial", "filter", "channel", "pipeline", "data+filter", "spatial-then-data"):
        assert f" {name} " in out
    assert "recommended:" in out and "activations" in out and "GPU-h" in out


def test_run_json_and_trace(tmp_path, capsys):
    trace = tmp_path / "iter.json"
    assert main(["run", "--profile", V100, "--model", "small_cnn2d", "--batch", "32", "--gpus", "4", "--json",
                 "--trace", str(trace), "--optimizer", "adam", "--dtype", "bf16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    preds = doc["predictions"]
    assert doc["model"] == "small_cnn2d"
    assert set(STRATEGIES) <= {p["plan"]["strategy"] for p in preds}
    feasible = [p for p in preds if p["feasible"]]
    assert feasible and all(p["iteration_s"] > 0 and p["interval_s"][0] <= p["iteration_s"] <= p["interval_s"][1]
                            for p in feasible)
    assert preds[0]["plan"]["optimizer"] == "adam" and preds[0]["optimizer_bytes"] > 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == "compute" for e in events)


def test_search_finds_configurations(capsys):
    assert main(["search", "--profile", V100, "--model", "small_cnn2d", "--batch", "64", "--max-gpus", "12",
                 "--json", "--objective", "cost"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["evaluated"] > doc["feasible"] > 0 and doc["predictions"]
    devices = {p["plan"]["devices"] for p in doc["predictions"]}
    assert devices <= set(range(1, 13))


def _no_conv_profile(tmp_path):
    doc = yaml.load(Path(V100).read_text(), Loader=yaml.CSafeLoader)
    doc["coefficients"]["compute"] = {k: v for k, v in doc["coefficients"]["compute"].items()
                                      if not k.startswith(("conv2d/", "conv2d_winograd/"))}
    path = tmp_path / "no-conv.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["--model", "resnet51", "--batch", "8", "--gpus", "2"], "unknown model"),
    (["--model", "small_cnn2d", "--batch", "0", "--gpus", "2"], "argument --batch: must be in 1.."),
    (["--model", "small_cnn2d", "--batch", "8", "--gpus", "-4"], "argument --gpus: must be in 1.."),
    (["--model", "small_cnn2d", "--batch", "6", "--gpus", "4", "--strategy", "data"], "not divisible"),
    (["--model", "small_cnn2d", "--batch", "8", "--gpus", "2", "--profile", "/no/such.yaml"], "no/such.yaml"),
    (["--model", "small_cnn2d", "--batch", "8", "--gpus", "2", "--model-arg", "widht=3"], "widht"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    if "--profile" not in argv:
        argv = argv + ["--profile", V100]
    assert main(["run"] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("name", ["v100-abci-4gpu.published", "v100-abci-4gpu.published.yaml"])
def test_a_shipped_profile_is_named_by_its_name_from_any_directory(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--profile", name, "--model", "small_cnn2d", "--batch", "8", "--gpus", "2",
                 "--strategy", "data", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"] == V100


def test_a_path_beats_a_shipped_name_and_an_unknown_name_lists_the_shipped_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("v100-abci-4gpu.published.yaml").write_text(Path(_no_conv_profile(tmp_path)).read_text())
    assert main(["run", "--profile", "v100-abci-4gpu.published.yaml", "--model", "small_cnn2d", "--batch", "8",
                 "--gpus", "2", "--strategy", "data"]) == 2  # the local file, which lacks conv2d, not the shipped one
    assert "conv2d" in capsys.readouterr().err
    assert main(["run", "--profile", "v100-nowhere.published", "--model", "small_cnn2d", "--batch", "8",
                 "--gpus", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "v100-nowhere.published" in err and "no shipped profile" in err
    assert "v100-abci-4gpu.published" in err and "h200" in err


def test_missing_coefficient_is_named(tmp_path, capsys):
    assert main(["run", "--profile", _no_conv_profile(tmp_path), "--model", "small_cnn2d", "--batch", "8",
                 "--gpus", "2", "--strategy", "data"]) == 2
    err = capsys.readouterr().err.strip()
    assert "conv2d" in err and len(err.splitlines()) == 1
