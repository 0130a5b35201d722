"""One set of flags (predictor.flags, calibrate.profile_arguments): every subcommand of `profiler`, `python -m
profiler` and `predictor`, found in the command tables (so a command added later is walked too), takes its model,
dtype, strategy, optimizer, framework, stack and profile arguments from the registries; the forms a profile or a
runs file may be given in all work; and `predictor search` uses the --framework it accepts."""
from __future__ import annotations

import argparse
import importlib
import json

import pytest

from calibrate.profile_arguments import profile_type
from calibrate.shipped import shipped_profile_names
from calibrate.system_constants import STACKS
from paraoracle.cli import PROFILER_COMMANDS
from predictor.cli import COMMANDS as PREDICTOR_COMMANDS
from predictor.overlap import FRAMEWORKS
from predictor.plan import ALL_STRATEGIES, DTYPES, OPTIMIZERS
from predictor.zoo import ZOO
from profiler.cli import COMMANDS as PROFILER_STAGE_COMMANDS
from profiler.cliutil import OneLineParser

SUBCOMMANDS = sorted({(f"{prog} {name}", module) for prog, table in (
    ("predictor", PREDICTOR_COMMANDS), ("profiler", PROFILER_COMMANDS), ("python -m profiler", PROFILER_STAGE_COMMANDS))
    for name, (module, _) in table.items()})
#: --strategy may offer these besides the plan's strategies
META_STRATEGIES = {"all", "best"}
#: argument destinations that name a profile (--profile, --into, show/fit's PROFILE, drift's OLD/NEW, history's)
PROFILE_DESTS = {"profile", "profile_positional", "into", "old", "new", "paths"}


def _actions(module_path: str) -> list[argparse.Action]:
    parser = OneLineParser(prog="x")
    importlib.import_module(module_path).add_arguments(parser)
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def _flag(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


@pytest.mark.parametrize("command, module_path", SUBCOMMANDS, ids=[c for c, _ in SUBCOMMANDS])
def test_every_subcommand_takes_its_choices_from_the_registries(command, module_path):
    checked = []
    for action in _actions(module_path):
        flag = _flag(action)
        if flag == "--dtype":
            assert tuple(action.choices) == DTYPES and action.help.startswith("training precision: "), command
        elif flag == "--optimizer":
            assert tuple(action.choices) == OPTIMIZERS and action.help.startswith("optimizer whose state"), command
        elif flag == "--strategy":
            assert set(action.choices) - META_STRATEGIES == set(ALL_STRATEGIES), command
        elif flag == "--framework":
            assert tuple(action.choices) == FRAMEWORKS, command
        elif flag == "--stack":
            assert tuple(action.choices) == STACKS, command
        elif flag == "--model":
            assert all(name in action.help for name in ZOO), f"{command} --model: help names every zoo model"
        elif action.dest in PROFILE_DESTS:
            assert action.type is profile_type, f"{command} {flag}: a path or a shipped profile's name"
            if not action.help.startswith("the same as"):
                assert all(name in action.help for name in shipped_profile_names()), f"{command} {flag}"
        else:
            continue
        checked.append(flag)
    flags = {_flag(a) for a in _actions(module_path)}
    if "--model" in flags:  # the model flags come together (predictor.flags.add_model_arguments)
        assert {"--model-arg", "--input-shape"} <= flags, command
    assert len(checked) == len(set(checked)), f"{command}: a flag declared twice"


def test_the_walk_covers_the_commands_and_flags_of_the_issue():
    walked = {command for command, _ in SUBCOMMANDS}
    assert {"predictor run", "predictor search", "predictor shapes", "predictor validate", "predictor model-error",
            "predictor train-correction", "profiler calibrate", "profiler show", "profiler fit", "profiler drift",
            "profiler history"} <= walked
    run = {_flag(a): a for a in _actions(PREDICTOR_COMMANDS["run"][0])}
    assert set(run["--dtype"].choices) == {"fp32", "tf32", "fp16", "bf16", "fp8"} and len(ZOO) == 18
    assert all(name in run["--model"].help for name in ("gpt", "bert", "efficientnet_b4", "resnext101_32x4d"))


def _run(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_search_uses_the_framework_it_accepts(capsys):
    """Horovod's fusion cycles and MXNet's grouped reduction cost data parallelism differently from DDP's
    buckets: the best ResNet-50 plan's time changes, and the plans carry the framework."""
    from predictor.cli import main

    base = ["search", "--model", "resnet50", "--batch", "256", "--max-gpus", "64", "--top", "3", "--json"]
    times = {}
    for framework in ("ddp", "horovod", "horovod-grouped"):
        code, out, _ = _run(main, base + ["--framework", framework], capsys)
        assert code == 0
        best = json.loads(out)["predictions"][0]
        assert best["plan"]["framework"] == framework
        times[framework] = best["iteration_s"]
    assert len(set(times.values())) == 3, times


def test_the_fast_search_equals_the_exhaustive_one_under_every_framework():
    from predictor.api import load_cost_model, load_model
    from predictor.search import search

    graph, (cm, _) = load_model("small_cnn2d"), load_cost_model("a100-dgx-8gpu.published")
    for framework in FRAMEWORKS:
        common = dict(batch=48, max_devices=24, top=10, interval=False, framework=framework, synthetic_data=True)
        exhaustive, fast = search(graph, cm, exhaustive=True, **common), search(graph, cm, **common)
        assert exhaustive.best and [p.plan for p in fast.best] == [p.plan for p in exhaustive.best]
        assert {p.plan.framework for p in exhaustive.best} == {framework}
        assert all(p.plan.synthetic_data for p in exhaustive.best)


def test_a_profile_is_a_path_or_a_shipped_name_positional_or_flag(tmp_path, capsys):
    from paraoracle.cli import profiler_main

    for argv in (["show", "v100-abci-4gpu.published"], ["show", "--profile", "v100-abci-4gpu.published"]):
        code, out, _ = _run(profiler_main, argv, capsys)
        assert code == 0 and "v100-abci-4gpu.published.yaml" in out
    code, _, err = _run(profiler_main, ["show", "v100-abci-4gpu.published", "--profile", "h200"], capsys)
    assert code == 2 and "give the profile once" in err
    code, _, err = _run(profiler_main, ["show", "no-such-machine"], capsys)
    assert code == 2 and "no shipped profile of that name" in err and "v100-dgx1-8gpu.published" in err
    code, _, err = _run(profiler_main, ["fit", "v100-abci-4gpu.published"], capsys)  # in place: refused
    assert code == 2 and "read-only" in err and len(err.strip().splitlines()) == 1


def test_runs_are_given_positionally_or_with_runs_in_both_commands(tmp_path, capsys):
    from predictor.cli import main
    from tests.fuzz import materials as m

    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(m.runs_lines()) + "\n")
    profile = tmp_path / "p.yaml"
    profile.write_text(m.text(m.V100))
    outputs = []
    for form in (["--runs", str(runs)], [str(runs)]):
        out = tmp_path / f"c{len(outputs)}.json"
        code, _, err = _run(main, ["train-correction", "--profile", str(profile), *form, "--out", str(out)], capsys)
        assert code == 0, err
        outputs.append(json.loads(out.read_text())["model"])
    assert outputs[0] == outputs[1]
    code, _, err = _run(main, ["train-correction", "--profile", str(profile), str(runs), "--runs", str(runs)], capsys)
    assert code == 2 and "one runs file" in err
    code, _, err = _run(main, ["train-correction", "--profile", str(profile)], capsys)
    assert code == 2 and "RUNS" in err
    for form in (["--runs", str(runs)], [str(runs)]):  # no usable run (no prediction): the same answer both ways
        code, _, err = _run(main, ["model-error", "--profile", "v100-dgx1-8gpu.published", *form], capsys)
        assert code == 2 and "no run with a measured time and a feasible prediction" in err
    code, _, err = _run(main, ["model-error", "--profile", "v100-dgx1-8gpu.published", str(runs), "--write"], capsys)
    assert code == 2 and "read-only" in err
