"""Software stacks: the fitted factors (calibrate.system_constants.StackScales, predictor.published.fit), the
published profile carrying them, and a plan's stack scaling its compute only (predictor.stacks)."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profiles_dir
from calibrate.system_constants import StackScales, load_stacks, precision_class
from predictor.api import load_model, predict_all
from predictor.published.constants_fit import Decompositions, _stack_factor
from predictor.published.fit import CONSTANTS_FILE
from predictor.synthetic import SyntheticCostModel
from profiler.errors import UserError
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

PROFILES = shipped_profiles_dir()


def test_precision_classes_and_factor_lookup():
    assert precision_class("float16") == precision_class("bfloat16") == "mixed"
    assert precision_class("float32") == precision_class("tf32") == "single"
    s = StackScales({"pytorch": {"mixed": 1.3, "single": 1.1}})
    assert s.factor("pytorch", "float16") == 1.3 and s.factor("pytorch", "tf32") == 1.1
    assert s.factor("mxnet", "float16") == 1.0  # a stack without a factor is neutral


def test_stack_factor_closed_form_by_hand():
    # measured = 1.5 * C + R exactly: the least-squares factor is 1.5 (up to the weak pull towards 1)
    rows = [(c, 0.01, 1.5 * c + 0.01) for c in (0.1, 0.2, 0.3, 0.5)]
    assert _stack_factor(rows) == pytest.approx(1.5, rel=0.01)
    assert _stack_factor([(1.0, 0.0, 1000.0)] * 4) == 5.0  # bounded


def _decompositions(stack_truth: dict, a_truth: dict) -> Decompositions:
    """Synthetic single-node records: measured = s_stack,class * a_family,dtype * (F + M) + R."""
    d = Decompositions([], None, {})
    i = 0
    for family, dtypes in a_truth.items():
        for dtype, a in dtypes.items():
            for stack, classes in stack_truth.items():
                s = classes[precision_class(dtype)]
                for k in range(5):
                    parts = {"F": 0.05 + 0.01 * k + 0.003 * i, "M": 0.02, "G": 0.0, "R": 0.002, "dtype": dtype}
                    run = SimpleNamespace(source=f"src{i % 3}", id=f"r{i}",
                                          measured_s=s * a * (parts["F"] + parts["M"]) + parts["R"])
                    d.items.append((SimpleNamespace(run=run, stack=stack), family, parts))
                    i += 1
    return d


def test_alternating_fit_recovers_stacks_and_families():
    stacks = {"pytorch": {"single": 1.2, "mixed": 1.5}, "mxnet": {"single": 1 / 1.2, "mixed": 1 / 1.5}}
    a = {"V100": {"float32": 1.1, "float16": 1.3}, "A100": {"float32": 0.9, "float16": 1.0}}
    fitted = _decompositions(stacks, a).fit()
    for stack, classes in stacks.items():
        for cls, value in classes.items():
            assert fitted.stacks.scales[stack][cls] == pytest.approx(value, rel=0.03)
    # what predictions use is the product, which must be right for every (family, dtype, stack)
    for family, dtypes in a.items():
        for dtype, value in dtypes.items():
            for stack in stacks:
                product = fitted.families[family].flops_time_scale[dtype] * fitted.stacks.factor(stack, dtype)
                assert product == pytest.approx(value * stacks[stack][precision_class(dtype)], rel=0.02)


def test_stacks_file_is_checked(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("families: {}\nsoftware_stacks: {scales: {jax: {single: 1.0}}}\n")
    with pytest.raises(UserError, match="software_stacks.scales.jax: unknown stack"):
        load_stacks(path)
    path.write_text("families: {}\nsoftware_stacks: {scales: {pytorch: {double: 1.0}}}\n")
    with pytest.raises(UserError, match="keys must be single or mixed"):
        load_stacks(path)
    assert load_stacks(tmp_path / "absent.yaml").scales == {}


def test_shipped_profiles_carry_the_fitted_stacks():
    shipped = load_stacks(CONSTANTS_FILE)
    assert set(shipped.scales) >= {"pytorch", "mxnet", "tensorflow"}
    cm = load_cost_model(PROFILES / "v100-dgx1-8gpu.published.yaml")
    assert cm.stack_time_scale("pytorch", "float16") == shipped.factor("pytorch", "float16")
    assert cm.stack_time_scale("jax-like-unknown", "float16") == 1.0


def test_plan_stack_scales_compute_only():
    graph = load_model("small_cnn2d", width=8, image=32)
    cm = kernels_only(load_cost_model(PROFILES / "v100-dgx1-8gpu.published.yaml"))
    common = dict(strategies=("data",), devices_per_node=8, dtype="fp16", interval=False)
    py, = predict_all(graph, 64, 8, cm, stack="pytorch", **common)
    mx, = predict_all(graph, 64, 8, cm, stack="mxnet", **common)
    ratio = cm.stack_time_scale("pytorch", "float16") / cm.stack_time_scale("mxnet", "float16")
    assert not math.isclose(ratio, 1.0)
    # the compute of a layer is its calls plus a framework overhead the stack does not scale (0 here)
    assert (py.compute_fwd_s + py.compute_bwd_s) == pytest.approx((mx.compute_fwd_s + mx.compute_bwd_s) * ratio,
                                                                  rel=1e-9)
    assert py.comm_exposed_total_s + py.comm_hidden_total_s == pytest.approx(
        mx.comm_exposed_total_s + mx.comm_hidden_total_s, rel=1e-9)
    # a calibrated (or synthetic) cost model measured its own stack: nothing changes
    a, = predict_all(graph, 64, 8, SyntheticCostModel(), stack="pytorch", **common)
    b, = predict_all(graph, 64, 8, SyntheticCostModel(), stack="mxnet", **common)
    assert a.iteration_s == b.iteration_s


def test_unknown_stack_is_a_one_line_error(capsys):
    from predictor.cli import main

    assert main(["run", "--model", "small_cnn2d", "--batch", "8", "--gpus", "1", "--stack", "jax"]) == 2
    err = capsys.readouterr().err
    assert "--stack" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(UserError, match="unknown stack 'jax'"):
        predict_all(load_model("small_cnn2d"), 8, 1, SyntheticCostModel(), stack="jax")


def test_predictor_run_json_names_the_stack(capsys):
    from predictor.cli import main

    assert main(["run", "--model", "small_cnn2d", "--batch", "8", "--gpus", "1", "--strategy", "serial",
                 "--stack", "tensorflow", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predictions"][0]["plan"]["stack"] == "tensorflow"


def test_records_map_to_their_stack():
    from predictor.published.corpus import CORPUS_DIR, load_corpus
    from predictor.published.rowmap import interpret, load_rules

    rules = load_rules()
    setups = {s.run.id: s for s in (interpret(r, rules) for r in load_corpus(CORPUS_DIR / "cnn_runs.yaml"))
              if hasattr(s, "stack")}
    assert setups["dle-pyt-resnet50_v1.5-dgxa100-80-tf32-1gpu"].stack == "pytorch"
    assert setups["dle-mxnet-resnet50_v1.5-dgx2-32-fp32-2gpu"].stack == "mxnet"
    assert setups["dlperf-resnet50_v1.5-oneflow-fp32-1gpu"].stack == "oneflow"
    assert {s.stack for s in setups.values()} <= {"pytorch", "mxnet", "tensorflow", "paddle", "oneflow", "chainer",
                                                    "other"}


def test_a_bad_stack_rule_is_refused(tmp_path):
    import yaml

    from predictor.published.rowmap import RULES_FILE, load_rules

    rules = yaml.safe_load(RULES_FILE.read_text())
    rules["stacks"].append({"match": "jax", "stack": "jax"})
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    with pytest.raises(UserError, match="section stacks"):
        load_rules(path)
