"""`predictor run`'s compact default (issue 39): one table line per runnable plan within COLUMNS=100, the plans that
cannot run in one line, the recommendation and its why; `--wide` keeps every column and the memory table. Its
`--strategy all` rows from the search (the 3-D layout, the sharded data plan), and `predictor search`'s compact
default."""
import json

import pytest

from calibrate.shipped import shipped_profile
from predictor.cli import main
from predictor.plan import Plan, Prediction
from predictor.report import interval_pct, rate_text, why_lines

V100 = str(shipped_profile("v100-abci-4gpu.published"))
ARGS = ["run", "--profile", V100, "--model", "resnet50", "--batch", "256", "--gpus", "8", "--strategy", "all",
        "--dataset-size", "1281167"]


def test_default_fits_100_columns_one_line_per_plan(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(ARGS + ["--json"]) == 0
    preds = json.loads(capsys.readouterr().out)["predictions"]
    runnable = [p for p in preds if p["feasible"]]
    assert main(ARGS) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    for rank, p in enumerate(runnable, 1):  # rank, strategy and samples/s on one line: no cell wrapped
        row = [line for line in lines if line.split()[:2] == [str(rank), p["plan"]["strategy"]]]
        assert len(row) == 1, p["plan"]["strategy"]
        assert rate_text(p["throughput_samples_per_s"]) in row[0]
    assert not any("compute f+b" in line for line in lines)  # the wide table's columns are not there
    cannot = [line for line in lines if line.startswith("cannot run: ")]
    infeasible = [p["plan"]["strategy"] for p in preds if not p["feasible"]]
    assert infeasible and len(cannot) == 1 and all(name in cannot[0] for name in infeasible)
    recommended = next(i for i, line in enumerate(lines) if line.startswith("recommended: "))
    assert lines[recommended].startswith(f"recommended: {runnable[0]['plan']['strategy']} (")
    assert lines[recommended + 1].startswith("why: fastest plan that fits")


def test_wide_keeps_every_column_and_the_memory_table(capsys):
    assert main(ARGS + ["--wide"]) == 0
    out = capsys.readouterr().out
    for needle in ("compute f+b", "exposed comm", "max batch", "memory per device", "recommended:", "epoch"):
        assert needle in out, needle


def _pred(strategy: str, iteration_s: float, memory_bytes: float, cap: float = 16e9) -> Prediction:
    pred = Prediction(plan=Plan(strategy, batch=8, devices=2, devices_per_node=2, p_data=2),
                      compute_fwd_s=iteration_s, activations_bytes=memory_bytes, device_memory_bytes=cap)
    pred.finish()
    pred.interval_s = (0.8 * iteration_s, 1.3 * iteration_s)
    return pred


def test_why_names_the_runner_up_and_the_margin():
    fast, slow = _pred("data", 0.10, 4e9), _pred("data+filter", 0.125, 2e9)
    head, why = why_lines([fast, slow])
    assert head.startswith("recommended: data (d2), 0.1 s/iteration")
    assert "25% ahead of data+filter" in why and "memory 4.00 of 16.00 GB" in why and "activations 4.00" in why
    assert interval_pct(fast) == "\u00b130%"  # the wider side: +30%


def test_why_says_when_nothing_fits():
    big = _pred("data", 0.10, 20e9)
    head, why = why_lines([big])
    assert "does NOT fit" in head and why.startswith("why: no plan fits in 16.00 GB; this one needs 20.00 GB")


def test_a_long_command_is_broken_before_its_flags():
    from predictor.cmd_run import shell_lines

    command = "profiler calibrate --device cpu --model resnet50 --batch 64 --gpus 2 --strategy pipeline --out P.yaml"
    text = shell_lines(command, 60)
    assert all(len(line) <= 60 for line in text.splitlines()) and len(text.splitlines()) == 2
    assert text.replace(" \\\n    ", " ").strip() == command
    assert shell_lines("a --b", 100) == "  a --b"


H100 = str(shipped_profile("h100-dgx-8gpu.published"))
GPT = ["run", "--profile", H100, "--model", "gpt", "--model-arg", "layers=8", "--model-arg", "hidden=2048",
       "--model-arg", "heads=16", "--model-arg", "seq=1024", "--dtype", "bf16", "--optimizer", "adam", "--batch", "64",
       "--gpus", "16", "--strategy", "all"]


def test_all_takes_the_searched_3d_layout(capsys, monkeypatch):
    """`--strategy all` left data+tensor+pipeline out (it has no single default layout), so a language model's
    recommendation could be a plan twice as slow as the layout `predictor search` finds at the same device count.
    Its row now is the search's best layout there, predicted as the other rows are; a CNN gets no such row."""
    from predictor.api import _trace_zoo, load_cost_model, predict, search

    assert main(GPT + ["--json"]) == 0
    preds = json.loads(capsys.readouterr().out)["predictions"]
    (row,) = [p for p in preds if p["plan"]["strategy"] == "data+tensor+pipeline"]
    graph = _trace_zoo("gpt", None, {"layers": 8, "hidden": 2048, "heads": 16, "seq": 1024})
    cm = load_cost_model(H100)[0]
    best = search(graph, cm, batch=64, max_devices=16, min_devices=16, dtype="bf16", optimizer="adam", top=1,
                  strategies=("data+tensor+pipeline",)).best[0]
    assert row["plan"]["p_tensor"] == best.plan.p_tensor and row["plan"]["stages"] == best.plan.stages
    assert abs(row["iteration_s"] - predict(graph, best.plan, cm).iteration_s) < 1e-12
    monkeypatch.setenv("COLUMNS", "100")
    assert main(GPT) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    header = next(line for line in lines if line.split()[:2] == ["#", "strategy"])
    assert all(col in header for col in ("iteration", "samples/s", "mem GB", "bottleneck"))  # no column squeezed
    assert main(ARGS + ["--json"]) == 0
    assert not [p for p in json.loads(capsys.readouterr().out)["predictions"]
                if p["plan"]["strategy"] == "data+tensor+pipeline"]


SEARCH = ["search", "--profile", H100, "--model", "gpt", "--model-arg", "layers=8", "--model-arg", "hidden=2048",
          "--model-arg", "heads=16", "--model-arg", "seq=1024", "--dtype", "bf16", "--optimizer", "adam",
          "--batch", "64", "--max-gpus", "16", "--min-gpus", "8", "--top", "5"]


def test_search_default_is_compact_and_its_intervals_are_run_s(capsys, monkeypatch):
    """`predictor search` printed a 200-column table only; its default is now run's compact table with the device
    count and each split whole (wrapped in its column), and `--wide` keeps the full one. Its intervals were the
    coefficient bounds alone; they are now what `predictor run` gives the same plan (the model's error and the
    at-scale range too)."""
    from predictor.api import _trace_zoo, load_cost_model, predict
    from predictor.plan import Plan

    assert main(SEARCH + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    top = doc["predictions"][0]
    graph = _trace_zoo("gpt", None, {"layers": 8, "hidden": 2048, "heads": 16, "seq": 1024})
    fields = {k: v for k, v in top["plan"].items() if k in Plan.__dataclass_fields__}
    plan = Plan(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
    again = predict(graph, plan, load_cost_model(H100)[0])
    assert top["interval_s"] == pytest.approx(list(again.interval_s), rel=1e-9)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(SEARCH) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100 and "compute f+b" not in out
    header = next(line for line in lines if line.split()[:3] == ["#", "strategy", "GPUs"])
    assert all(col in header for col in ("split", "iteration", "samples/s", "mem GB"))
    best = next(line for line in lines if line.startswith("best: "))
    assert top["plan"]["strategy"] in best and f"on {top['plan']['devices']} devices" in best
    split = "".join(line[header.index("split"):header.index("iteration")].strip() for line in lines
                    if line.strip() and lines.index(line) > lines.index(header) + 1)
    assert plan.describe().replace(" ", "") in split.replace(" ", "")  # the top split whole, though wrapped
    monkeypatch.delenv("COLUMNS")
    assert main(SEARCH + ["--wide"]) == 0
    assert "compute f+b" in capsys.readouterr().out


def test_3d_on_default_degrees_names_the_searched_layout_and_its_flags(capsys):
    """data+tensor+pipeline without --tensor-parallel and --pipeline-stages runs one node's GPUs as the tensor
    group and the nodes as stages; when the search finds a layout at least 5% faster the output names it with the
    flags that pin it, and those flags reproduce it."""
    argv = [a for a in GPT if a != "all"][:-1] + ["--strategy", "data+tensor+pipeline"]
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    hint = doc["searched_layout"]
    assert hint["iteration_s"] < 0.95 * doc["predictions"][0]["iteration_s"]
    assert main(argv + hint["flags"].split() + ["--json"]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert "searched_layout" not in pinned  # degrees given: no hint
    assert pinned["predictions"][0]["iteration_s"] == pytest.approx(hint["iteration_s"], rel=1e-9)
    assert main(argv) == 0
    assert any(line.startswith("search: ") for line in capsys.readouterr().out.splitlines())


def test_all_takes_the_sharded_data_plan_when_ddp_does_not_fit(capsys):
    """Under a memory cap DDP's replicas exceed, `--strategy all` also lists the fastest sharded data plan (ZeRO 1-3
    or HSDP, as `predictor search` finds it): data parallelism is then not reported as out of memory alone."""
    assert main(GPT + ["--json"]) == 0
    ddp = next(p for p in json.loads(capsys.readouterr().out)["predictions"]
               if p["plan"]["strategy"] == "data" and not p["plan"]["zero_stage"])
    cap_gb = 0.8 * ddp["memory_bytes"] / 1e9
    assert main(GPT + ["--memory-cap", f"{cap_gb:.3f}", "--json"]) == 0
    data = [p for p in json.loads(capsys.readouterr().out)["predictions"] if p["plan"]["strategy"] == "data"]
    assert any(not p["fits"] and not p["plan"]["zero_stage"] for p in data)
    sharded = [p for p in data if p["plan"]["zero_stage"]]
    assert len(sharded) == 1 and sharded[0]["fits"] and sharded[0]["memory_bytes"] <= cap_gb * 1e9
