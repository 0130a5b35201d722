"""--cudnn-benchmark: whether the run lets cuDNN search for each convolution's algorithm is a setting of the run."""
from __future__ import annotations

import argparse

import pytest

from calibrate.deepbench_kernels import kernels_for
from calibrate.published import NODES, build_profile
from calibrate.cost_model import load_cost_model
from predictor import cmd_run
from predictor.flags import apply_run_settings


def parse(*extra):
    parser = argparse.ArgumentParser()
    cmd_run.add_arguments(parser)
    return parser.parse_args(["--model", "resnet50", "--batch", "8", "--gpus", "1", *extra])


@pytest.mark.parametrize("flag,expected", [(("--cudnn-benchmark", "off"), False), (("--cudnn-benchmark", "on"), True)])
def test_the_flag_sets_the_cost_models_algorithm_setting(flag, expected):
    _, cost_model, _ = cmd_run.load_inputs(parse(*flag))
    assert cost_model.conv_algorithm_search is expected


def test_without_the_flag_the_profile_decides_and_the_heuristic_is_never_faster():
    v100 = next(node for node in NODES if "V100-SXM2-16GB" in node.gpu.name)
    cm = load_cost_model(build_profile(v100, None, kernels=kernels_for(v100.gpu.name)))
    assert cm.conv_algorithm_search is True  # DeepBench's kernels were timed with cuDNN's search
    conv = {"N": 32, "C": 128, "H": 56, "W": 56, "F": 128, "kernel": 3, "stride": 1, "padding": 1}
    searched = [cm.compute_time_s("conv2d", p, conv, "float32") for p in ("fwd", "bwd_data", "bwd_weight")]
    apply_run_settings(parse("--cudnn-benchmark", "off"), cm)
    heuristic = [cm.compute_time_s("conv2d", p, conv, "float32") for p in ("fwd", "bwd_data", "bwd_weight")]
    assert all(h >= s for h, s in zip(heuristic, searched)) and heuristic != searched
