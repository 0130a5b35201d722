"""Grouped convolutions are their own compute family (calibrate.shapes.family_op): a depthwise convolution runs
several times slower per FLOP than a dense one, so its samples must not bend the dense convolutions' fit, and a
grouped call is costed with the grouped fit (docs/decisions/2026-12-06-grouped-conv-family.md)."""
import numpy as np
import pytest

from calibrate import shapes
from calibrate.cost_model import load_cost_model
from calibrate.fit import compute_points, fit_profile
from calibrate.synthetic import conv_samples, profile_with, stream_samples

PEAK, BW = 100e12, 2e12


def dense_s(flops, nbytes):  # a compute-bound dense convolution at 70% of the peak
    return 5e-6 + flops / (0.7 * PEAK)


def grouped_s(flops, nbytes):  # a memory-bound depthwise convolution at 15% of the bandwidth
    return 5e-6 + nbytes / (0.15 * BW)


DENSE = [dict(N=n, C=c, F=c, H=h, W=h, kernel=3, stride=1, padding=1) for n in (8, 32) for c in (64, 128, 256)
         for h in (14, 28, 56)]
DEPTHWISE = [dict(p, groups=p["C"]) for p in DENSE]


def test_family_op_by_hand():
    assert shapes.family_op("conv2d", {"groups": 32}) == "conv2d_grouped"
    assert shapes.family_op("conv3d", {"groups": 2}) == "conv3d_grouped"
    assert shapes.family_op("conv2d", {"groups": 1}) == shapes.family_op("conv2d", {}) == "conv2d"
    assert shapes.family_op("linear", {"groups": 4}) == "linear"
    assert shapes.base_op("conv2d_grouped") == "conv2d" and shapes.base_op("gemm") == "gemm"


def _samples(rng):
    s = conv_samples(DENSE, dense_s, rng) + conv_samples(DEPTHWISE, grouped_s, rng)
    return [x.model_copy(update={"device": "cuda:0"}) for x in s]


def test_grouped_samples_fit_their_own_family():
    points = compute_points(_samples(np.random.default_rng(0)))
    assert sorted(points) == ["conv2d/fwd/float32", "conv2d_grouped/fwd/float32"]
    assert len(points["conv2d/fwd/float32"]) == len(DENSE)
    assert len(points["conv2d_grouped/fwd/float32"]) == len(DEPTHWISE)


@pytest.mark.slow  # real profile fits: seconds on 2 cores (CI runs it)
def test_a_grouped_call_is_costed_with_the_grouped_fit():
    """With grouped samples a depthwise call is costed within 25%; a profile of dense convolutions alone (the GPU
    grid before it measured grouped ones) costs it from the dense convolutions' efficiency, several times fast."""
    rng = np.random.default_rng(1)
    stream = stream_samples([1e6, 1e7, 1e8], lambda b: b / BW, rng, device="cuda:0")
    samples = _samples(rng)
    model = load_cost_model(fit_profile(profile_with(samples + stream)))
    dense_only = load_cost_model(fit_profile(profile_with([s for s in samples if "groups" not in s.params] + stream)))
    unseen = dict(N=16, C=96, F=96, H=20, W=20, kernel=3, stride=1, padding=1)
    depthwise = dict(unseen, groups=96)
    for params, truth in ((unseen, dense_s), (depthwise, grouped_s)):
        w = shapes.work("conv2d", "fwd", params, "float32")
        expected = truth(w["flops"], w["bytes"])
        assert model.compute_time_s("conv2d", "fwd", params, "float32") == pytest.approx(expected, rel=0.25)
    w = shapes.work("conv2d", "fwd", depthwise, "float32")
    assert dense_only.compute_time_s("conv2d", "fwd", depthwise, "float32") < 0.5 * grouped_s(w["flops"], w["bytes"])
    measured = DEPTHWISE[3]  # a measured grouped shape reads its own measurement
    w = shapes.work("conv2d", "fwd", measured, "float32")
    assert model.compute_time_s("conv2d", "fwd", measured, "float32") == pytest.approx(
        grouped_s(w["flops"], w["bytes"]), rel=0.1)
