"""`predictor validate`: suite parsing errors name the line; a run writes JSONL rows and the report;
an interrupted validation keeps the rows already measured; the report's accuracy and ranking maths."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calibrate.shipped import shipped_profile
from predictor.cli import main
from predictor.runner.suite import load_suite
from predictor import validate_report
from profiler.errors import UserError
from tests.interrupts import interruptible

# spawns processes or ranks, or profiles real training steps: not in the fast inner loop (-m "not slow")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROFILE = str(shipped_profile("v100-abci-4gpu.published"))  # any profile works for the mechanics

TINY = """warmup: 1
iterations: 2
runs:
  - {model: small_cnn2d, knobs: {width: 4, image: 16}, batch: 4, ranks: 1, strategies: [serial, serial+recompute]}
  - {model: small_cnn2d, knobs: {width: 4, image: 16}, batch: 4, ranks: 2, micro_batches: 2, strategies: [data, spatial, pipeline]}
"""


def _write(tmp_path, text, name="suite.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_builtin_suites_parse():
    default = load_suite("cpu_default")
    labels = {(r.strategy, r.addons) for r in default.runs}
    for strategy in ("serial", "data", "spatial", "filter", "channel", "pipeline", "data+spatial", "data+filter"):
        assert any(s == strategy for s, _ in labels), strategy
        models = {r.model for r in default.runs if r.strategy == strategy and not r.addons}
        assert len(models) >= 3 or strategy in ("data+spatial", "data+filter"), (strategy, models)
    assert ("serial", ("recompute",)) in labels and ("data", ("recompute",)) in labels
    assert load_suite("smoke").runs


@pytest.mark.parametrize("text,line,needle", [
    ("runs:\n  - {model: small_cnn2d, batch: 4, ranks: 2, strategy: data}\n  - {model: small_cnn2d, batch: 4, ranks: 2, strategy: diagonal}\n", 3, "unknown strategy"),
    ("warmup: 1\nruns:\n  - {model: small_cnn2d, batch: -4, ranks: 2, strategy: data}\n", 3, "batch"),
    ("runs:\n  - {model: small_cnn2d, ranks: 2, strategy: data}\n", 2, "missing batch"),
    ("runs:\n  - {model: small_cnn2d, batch: 4, ranks: 2, strategy: data, colour: red}\n", 2, "unknown key"),
    ("runs:\n  - {model: small_cnn2d, batch: 4, ranks: 2, strategy: spatial+recompute}\n", 2, "serial and data"),
    ("iterations: 3\nruns: [\n  {model: x\n", 4, "not valid YAML"),
    ("bogus: 1\n", 1, "unknown key"),
])
def test_malformed_suite_names_the_line(tmp_path, capsys, text, line, needle):
    path = _write(tmp_path, text)
    with pytest.raises(UserError, match=needle) as err:
        load_suite(path)
    assert f"{path}:{line}" in str(err.value)
    assert "\n" not in str(err.value)
    code = main(["validate", "--profile", PROFILE, "--suite", path, "--out", str(tmp_path / "o.jsonl")])
    assert code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_validate_writes_rows_report_and_plot(tmp_path, capsys):
    out, plot = tmp_path / "runs.jsonl", tmp_path / "scatter.png"
    out.write_text('{"earlier": "row"}\n')  # validate appends
    code = main(["validate", "--profile", PROFILE, "--suite", _write(tmp_path, TINY), "--out", str(out), "--plot", str(plot)])
    assert code == 0
    earlier, *rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert earlier == {"earlier": "row"}
    assert [r["label"] for r in rows] == ["serial", "serial+recompute", "data", "spatial", "pipeline"]
    for r in rows:
        assert r["measured_time_s"] > 0 and r["measured_iqr_s"] >= 0
        assert len(r["measured"]["iteration_times_s"]) == 2
        assert r["predicted_time_s"] > 0 and set(r["terms"]) and r["plan"]["p_data"] >= 1
        assert r["model_summary"]["flops_per_sample"] > 0 and r["model_summary"]["param_bytes"] > 0
        assert r["profile_sha256"] and r["threads"] == 1 and r["scenario"]
        assert r["measured_peak_memory_bytes"] > 0
    assert rows[0]["plan"]["p_data"] == 1 and rows[2]["plan"]["p_data"] == 2
    assert rows[1]["recompute_segments"] >= 1
    assert rows[4]["measured"]["stage_starts"][0] == 0
    text = capsys.readouterr().out
    assert "mean accuracy per strategy" in text and "ranking agreement" in text
    assert plot.stat().st_size > 1000


def test_interrupted_validation_keeps_measured_rows(tmp_path):
    suite = _write(tmp_path, "warmup: 0\niterations: 2\nruns:\n"
                   "  - {model: small_cnn2d, knobs: {width: 4, image: 16}, batch: 4, ranks: 1, strategy: serial}\n"
                   "  - {model: small_cnn2d, knobs: {width: 4, image: 16}, batch: 4, ranks: 2, strategy: data}\n")
    out = tmp_path / "runs.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "predictor", "validate", "--profile", PROFILE, "--suite", suite,
                             "--out", str(out), "--iterations", "2000"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=interruptible)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and out.read_text().strip()):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-500:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["label"] == "serial"


def test_accuracy_and_ranking_maths():
    rows = [
        {"label": "data", "scenario": "s1", "predicted_time_s": 1.0, "measured_time_s": 1.25},
        {"label": "filter", "scenario": "s1", "predicted_time_s": 2.0, "measured_time_s": 1.0},
        {"label": "data", "scenario": "s2", "predicted_time_s": 1.0, "measured_time_s": 1.0},
        {"label": "filter", "scenario": "s2", "predicted_time_s": 3.0, "measured_time_s": 2.0},
        {"label": "spatial", "scenario": "s3", "predicted_time_s": None, "measured_time_s": 1.0},
    ]
    acc = validate_report.per_strategy_accuracy(rows)
    assert acc["data"] == (pytest.approx((0.8 + 1.0) / 2), 2)
    assert acc["filter"] == (pytest.approx((0.0 + 0.5) / 2), 2)
    assert "spatial" not in acc
    assert validate_report.overall_accuracy(rows) == pytest.approx((0.8 + 0.0 + 1.0 + 0.5) / 4)
    ranking = {r["scenario"]: r["agree"] for r in validate_report.ranking(rows)}
    assert ranking == {"s1": False, "s2": True}


def test_a_mixture_of_experts_trains_and_is_measured(tmp_path):
    """A GPT whose MLPs are mixtures of experts (router, dispatch, grouped expert GEMMs, combine: the gpu_full suite's
    Qwen3-shaped rows, here tiny) trains serially under validate and gets its measured row and prediction."""
    out = tmp_path / "moe.jsonl"
    suite = _write(tmp_path, "warmup: 1\niterations: 2\nruns:\n"
                   "  - {model: gpt, knobs: {layers: 2, hidden: 32, heads: 4, kv_heads: 2, head_dim: 16, seq: 16, "
                   "vocab: 64, ffn: 24, mlp: swiglu, norm: rmsnorm, tie: false, dropout: 0.0, experts: 8, top_k: 2, "
                   "capacity_factor: 0}, batch: 3, ranks: 1, strategy: serial}\n")
    assert main(["validate", "--profile", PROFILE, "--suite", suite, "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["measured_time_s"] > 0 and row["predicted_time_s"] > 0 and row["knobs"]["experts"] == 8
