"""The convolutions' memory layout (Plan.memory_format): an NCHW run on a GPU's tensor cores pays cuDNN's transposes
to and from NHWC, 2 x (input + weight + output) bytes per convolution pass at the device's memory bandwidth
(docs/method.md §3, docs/decisions/2026-12-06-nchw-transposes.md); NHWC, FP32 and grouped calls pay nothing."""
import re
import shlex

import pytest

from calibrate import shapes
from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profiles_dir
from predictor.api import load_model, predict_all
from predictor.cli import main
from predictor.layercost import LayerCoster, Split, nchw_transpose_s
from predictor.published.corpus import CORPUS_DIR, load_corpus
from predictor.published.rowmap import interpret, load_rules
from profiler.errors import UserError

A100 = shipped_profiles_dir() / "a100-dgx-8gpu.published.yaml"
CONV = {"N": 32, "C": 64, "H": 56, "W": 56, "F": 64, "kernel": 3, "stride": 1, "padding": 1}


@pytest.fixture(scope="module")
def graph():
    return load_model("resnet50")


def test_transposes_by_hand():
    """2 x (32 x 64 x 56^2 x 2 input + 64 x 64 x 9 x 2 weight + the same output bytes) at the profile's triad."""
    cm = load_cost_model(A100)
    nbytes = (2 * 32 * 64 * 56 * 56 + 64 * 64 * 9) * 2
    assert shapes.work("conv2d", "fwd", CONV, "float16")["bytes"] == nbytes
    for pass_ in ("fwd", "bwd_data", "bwd_weight"):
        assert nchw_transpose_s(cm, "conv2d", pass_, CONV, "float16") == pytest.approx(cm.memory_time_s(2 * nbytes))


def test_only_tensor_core_dense_convolutions_on_a_gpu_pay(graph):
    cm = load_cost_model(A100)
    split = Split(32)
    convs = [i for i, l in enumerate(graph.layers) if l.op == "conv2d"]
    for dtype, pays in (("fp16", True), ("tf32", True), ("bf16", True), ("fp32", False)):
        nhwc, nchw = (LayerCoster(graph, cm, dtype, memory_format=f) for f in ("nhwc", "nchw"))
        for i in convs[:3]:
            (f0, b0), (f1, b1) = nhwc.times(i, split), nchw.times(i, split)
            assert (f1 > f0 and b1 > b0) if pays else (f1, b1) == (f0, b0), (dtype, i)
        other = next(i for i, l in enumerate(graph.layers) if l.op == "batchnorm")
        assert nhwc.times(other, split) == nchw.times(other, split)
    first = convs[0]  # the first layer runs no backward-data: its transposes are the forward's and the weight's
    nhwc, nchw = (LayerCoster(graph, cm, "fp16", memory_format=f) for f in ("nhwc", "nchw"))
    assert nchw.times(first, split)[0] - nhwc.times(first, split)[0] == pytest.approx(
        nchw_transpose_s(cm, "conv2d", "fwd", {**dict(_params(graph, first, split))}, "float16"))


def _params(graph, index, split):
    from predictor.layercost import _pass_params
    return _pass_params(graph.layers[index], split)[1]


def test_a_cpu_profile_pays_nothing(graph):
    class OnTheHost:  # a host (CPU) cost model: no tensor cores, no cuDNN
        device_is_host = True

        def __init__(self, cm):
            self._cm = cm

        def __getattr__(self, name):
            return getattr(self._cm, name)

    cm = load_cost_model(A100)
    assert LayerCoster(graph, cm, "fp16", memory_format="nchw").transposes
    assert not LayerCoster(graph, OnTheHost(cm), "fp16", memory_format="nchw").transposes
    assert not LayerCoster(graph, cm, "fp16", memory_format="nhwc").transposes


def test_predict_all_and_the_cli_take_the_setting(graph, capsys):
    cm = load_cost_model(A100)
    nhwc, nchw = (predict_all(graph, 256, 8, cm, strategies=("data",), dtype="fp16", memory_format=f)[0]
                  for f in ("nhwc", "nchw"))
    assert nchw.plan.memory_format == "nchw" and nchw.iteration_s > 1.2 * nhwc.iteration_s
    out = []
    for fmt in ("nhwc", "nchw"):
        assert main(["run", "--profile", str(A100), "--model", "resnet50", "--batch", "256", "--gpus", "1",
                     "--strategy", "serial", "--dtype", "fp16", "--memory-format", fmt]) == 0
        out.append(float(re.search(r"([\d.]+) s/iteration", capsys.readouterr().out).group(1)))
    assert out[1] > 1.2 * out[0]


def test_the_corpus_rows_state_the_layout_layouts_md_gives():
    """LAYOUTS.md's NCHW groups are exactly the rows whose record says memory_format: nchw, and the mapping
    carries it to the row's plan."""
    text = (CORPUS_DIR / "LAYOUTS.md").read_text()
    listed = {x.strip() for m in re.finditer(r"\* \*\*G\d+\*\* \(NCHW, \d+\): (.*)", text) for x in m.group(1).split(",")}
    corpus = load_corpus(CORPUS_DIR / "cnn_runs.yaml")
    stated = {r.id for r in corpus if r.extra.get("memory_format") == "nchw"}
    assert len(listed) == 43 and stated == listed
    rules = load_rules()
    setups = [interpret(r, rules) for r in corpus if r.id in listed]
    assert {s.memory_format for s in setups if hasattr(s, "memory_format")} == {"nchw"}


def test_search_and_the_sweep_cost_every_plan_in_the_layout_given(graph):
    """`predictor search`/`scale`/`report` take --memory-format as `run` does: each plan they evaluate runs in it
    (Plan.memory_format), so an NCHW sweep is slower at every count and the search's best NCHW plan is slower than
    its best NHWC one."""
    from predictor.scaling import BEST, sweep
    from predictor.search import search
    cm = load_cost_model(A100)
    best = {f: search(graph, cm, batch=256, max_devices=8, dtype="fp16", top=3, interval=False, memory_format=f)
            for f in ("nhwc", "nchw")}
    assert {p.plan.memory_format for p in best["nchw"].best} == {"nchw"}
    assert {p.plan.memory_format for p in best["nhwc"].best} == {"nhwc"}
    assert best["nchw"].best[0].iteration_s > 1.1 * best["nhwc"].best[0].iteration_s
    lines = {f: sweep(graph, cm, (1, 8), strategies=(BEST, "data"), batch_per_device=64, dtype="fp16",
                      memory_format=f).lines for f in ("nhwc", "nchw")}
    for name in (BEST, "data"):
        for slow, fast in zip(lines["nchw"][name], lines["nhwc"][name]):
            assert slow.prediction.plan.memory_format == "nchw"
            assert slow.prediction.iteration_s > 1.1 * fast.prediction.iteration_s, (name, slow.devices)
    with pytest.raises(UserError, match="memory format"):
        search(graph, cm, batch=256, max_devices=2, memory_format="nchwc")


def test_the_report_names_the_scale_command_that_prints_its_sweep():
    """The report's 'same sweep in a terminal' line is a `predictor scale` command whose flags parse back to the
    report's own settings (every shared flag given away from its default, the layout and load included)."""
    import argparse

    from predictor import cmd_report, cmd_scale
    report = argparse.ArgumentParser()
    cmd_report.add_arguments(report)
    given = ["--model", "resnet50", "--batch-per-gpu", "64", "--gpus", "1-64", "--out", "/tmp/x", "--dtype", "fp16",
             "--memory-format", "nchw", "--cluster-load", "busy", "--model-arg", "width=32", "--strategy", "data",
             "--strategy", "best", "--synthetic-data", "--memory-cap", "40", "--stack", "mxnet", "--bn-group", "2",
             "--cross-entropy", "fused"]
    args = report.parse_args(given)
    words = shlex.split(cmd_report._scale_command(args))
    assert words[:2] == ["predictor", "scale"]
    scale = argparse.ArgumentParser()
    cmd_scale.add_arguments(scale)
    back = scale.parse_args(words[2:])
    for dest, value in vars(back).items():
        if dest not in ("plot", "force"):
            assert getattr(args, dest) == value, dest
    plain = report.parse_args(["--model", "vgg16", "--batch", "256", "--html", "/tmp/x.html"])
    assert cmd_report._scale_command(plain) == "predictor scale --model vgg16 --batch 256"
