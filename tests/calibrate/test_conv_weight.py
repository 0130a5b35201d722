"""The CPU convolution weight floor (calibrate.backends.host, host_fit): its fit from the weight-bound design by hand, its
interpolation, the cost model's max(fitted time, floor), and the design in the CPU grid only."""
import math

import pytest

from calibrate import shapes
from calibrate.backends import host, host_fit
from calibrate.coefficients import ConvWeightFit, Im2colFloor
from profiler.profile import WEIGHT_DESIGN_LAYER, Sample


def design_sample(variant, channels, batch, times, layer=WEIGHT_DESIGN_LAYER):
    params = {"N": batch, "C": channels, "F": channels, "H": 2, "W": 2, "kernel": 3, "stride": 1, "padding": 1}
    return Sample(benchmark="conv2d", variant=variant, params=params, device="cpu", dtype="float32", threads=1,
                  times_s=list(times), extra={"layer": layer, "split": "base"})


def test_weight_bytes_by_hand():
    assert shapes.conv_weight_bytes("conv2d", {"N": 2, "C": 8, "F": 16, "H": 4, "W": 4, "kernel": 3}, "float32") \
        == 16 * 8 * 9 * 4
    assert shapes.conv_weight_bytes("conv3d", {"N": 1, "C": 8, "F": 4, "D": 2, "H": 2, "W": 2, "kernel": 5,
                                               "groups": 2}, "bf16") == 4 * 4 * 125 * 2


def test_fit_by_hand_and_floor_interpolates_in_log_weight():
    small, large = 160, 640  # weights 160^2 * 36 and 640^2 * 36 bytes
    w_s, w_l = small * small * 36.0, large * large * 36.0
    # fwd 1 ns/byte and 2 ns/byte; bwd_data 3 ns/byte at both; bwd_weight t(N) = W (a + N b): a 1 ns, b 0.5 ns
    # (small) and a 2 ns, b 1 ns (large). Each sample's median is its time; a slower second sweep is ignored.
    samples = []
    for channels, weight, fwd, bwd_a, bwd_b in ((small, w_s, 1e-9, 1e-9, 0.5e-9), (large, w_l, 2e-9, 2e-9, 1e-9)):
        for batch in (1, 8):
            samples += [design_sample("fwd", channels, batch, [fwd * weight] * 3),
                        design_sample("fwd", channels, batch, [5 * fwd * weight] * 3),
                        design_sample("bwd_data", channels, batch, [3e-9 * weight] * 3),
                        design_sample("bwd_weight", channels, batch, [weight * (bwd_a + batch * bwd_b)] * 3)]
    samples.append(design_sample("fwd", small, 1, [1.0], layer="small_design"))  # not the design: ignored
    fit = host_fit.fit_conv_weight(samples)
    assert fit.weight_bytes == [w_s, w_l]
    assert fit.s_per_byte["fwd"] == pytest.approx([1e-9, 2e-9])
    assert fit.s_per_byte["bwd_data"] == pytest.approx([3e-9, 3e-9])
    assert fit.s_per_byte["bwd_weight"] == pytest.approx([1e-9, 2e-9])
    assert fit.per_sample_s_per_byte == pytest.approx([0.5e-9, 1e-9])

    def params(channels, batch):
        return {"N": batch, "C": channels, "F": channels, "H": 7, "W": 7, "kernel": 3, "stride": 1, "padding": 1}

    # at a measured size: W a; the weight gradient adds N W b; halfway in log W: the mean of the two figures
    assert host.weight_floor_s(fit, "conv2d", "fwd", params(small, 4), "float32") == pytest.approx(w_s * 1e-9)
    assert host.weight_floor_s(fit, "conv2d", "bwd_weight", params(large, 4), "float32") \
        == pytest.approx(w_l * (2e-9 + 4 * 1e-9))
    middle = 320  # 320^2 = sqrt(160^2 * 640^2): the geometric mean of the two weights
    assert host.weight_floor_s(fit, "conv2d", "fwd", params(middle, 1), "float32") \
        == pytest.approx(middle * middle * 36.0 * 1.5e-9)
    # held beyond the measured sizes
    assert host.weight_floor_s(fit, "conv2d", "fwd", params(2000, 1), "float32") \
        == pytest.approx(2000 * 2000 * 36.0 * 2e-9)
    assert host.weight_floor_s(fit, "conv2d", "fwd", params(16, 1), "float32") == pytest.approx(16 * 16 * 36.0 * 1e-9)


def test_incomplete_design_fits_nothing_and_bad_records_are_refused():
    only_batch_one = [design_sample(v, 160, 1, [1e-3]) for v in ("fwd", "bwd_data", "bwd_weight")]
    assert host_fit.fit_conv_weight(only_batch_one) is None
    assert host_fit.fit_conv_weight([]) is None
    with pytest.raises(ValueError):
        ConvWeightFit(weight_bytes=[2.0, 1.0], s_per_byte={"fwd": [1.0, 1.0]}, per_sample_s_per_byte=[0.0, 0.0])
    with pytest.raises(ValueError):
        ConvWeightFit(weight_bytes=[1.0, 2.0], s_per_byte={"fwd": [1.0]}, per_sample_s_per_byte=[0.0, 0.0])


def test_cost_model_takes_the_larger_of_fitted_time_and_floor():
    from calibrate.cost_model import load_cost_model
    from calibrate.fit import fit_profile
    from calibrate.synthetic import noisy_times, profile_with
    import numpy as np

    rng = np.random.default_rng(0)
    samples = []
    for n, c, size in ((1, 8, 16), (2, 16, 16), (4, 16, 32), (2, 32, 8), (8, 8, 32), (1, 32, 32), (4, 8, 8),
                       (2, 8, 32), (8, 16, 8), (1, 16, 16), (4, 32, 16), (8, 32, 32)):
        params = {"N": n, "C": c, "F": c, "H": size, "W": size, "kernel": 3, "stride": 1, "padding": 1}
        flops = 2 * n * c * c * 9 * size * size
        for variant in ("fwd", "bwd_data", "bwd_weight"):
            samples.append(Sample(benchmark="conv2d", variant=variant, params=params, device="cpu", dtype="float32",
                                  threads=1, times_s=noisy_times(flops / 1e10, rng, 0.02, 5)))
    without = load_cost_model(fit_profile(profile_with(samples)))
    assert without.coefficients.conv_weight is None
    design = []
    for channels in (64, 128):
        weight = channels * channels * 36.0
        for batch in (1, 8):
            for variant in ("fwd", "bwd_data", "bwd_weight"):
                design.append(design_sample(variant, channels, batch, [weight * 1e-7 * (1 + (variant == "bwd_weight")
                                                                                        * batch)] * 3))
    model = load_cost_model(fit_profile(profile_with(samples + design)))
    fit = model.coefficients.conv_weight
    assert fit is not None and fit.s_per_byte["fwd"] == pytest.approx([1e-7, 1e-7])
    # the design does not move the efficiency fit: an ordinary call costs the same with and without it
    ordinary = {"N": 4, "C": 16, "F": 16, "H": 32, "W": 32, "kernel": 3, "stride": 1, "padding": 1}
    assert model.compute_time_s("conv2d", "fwd", ordinary, "float32") == pytest.approx(
        max(without.compute_time_s("conv2d", "fwd", ordinary, "float32"),
            host.weight_floor_s(fit, "conv2d", "fwd", ordinary, "float32")))
    # a wide convolution on a tiny map costs its floor, far above its arithmetic
    wide2d = {"N": 2, "C": 256, "F": 256, "H": 2, "W": 2, "kernel": 3, "stride": 1, "padding": 1}
    assert model.compute_time_s("conv2d", "fwd", wide2d, "float32") == pytest.approx(256 * 256 * 36.0 * 1e-7)
    assert without.compute_time_s("conv2d", "fwd", wide2d, "float32") < 0.1 * model.compute_time_s(
        "conv2d", "fwd", wide2d, "float32")


def test_cpu_grid_has_the_weight_design_and_gpu_grid_does_not(monkeypatch):
    import profiler.bench_compute as bc
    from profiler import caches

    monkeypatch.setattr(caches, "cpu_last_level_cache_bytes", lambda: 32 * 2**20)
    everything = [c for c in bc.plan_compute("cpu", True) if c.tags.get("layer") == WEIGHT_DESIGN_LAYER]
    for kernel, passes in ((3, {"fwd", "bwd_data", "bwd_weight"}), (7, {"fwd", "bwd_data"})):
        design = [c for c in everything if c.params["kernel"] == kernel]
        assert {c.variant for c in design} == passes
        weights = sorted({c.params["C"] ** 2 * kernel * kernel * 4 for c in design})
        assert len(weights) == 2 and weights[0] < 32 * 2**20 < weights[1]
        assert math.isclose(weights[1] / weights[0], 8, rel_tol=0.15)  # 0.25x and 2x the cache
        assert {c.params["N"] for c in design} == {1, 8} and all(c.params["H"] == c.params["W"] == 2 for c in design)
        assert all(c.params["padding"] == kernel // 2 for c in design)
        # the 7x7 shapes are oneDNN's im2col regime in both their passes, the 3x3 ones in neither
        assert all(host.onednn_gemm_conv("conv2d", c.variant, c.params, "float32", 1) == (kernel == 7)
                   for c in design)
    assert len(everything) == 12 + 8
    assert not [c for c in bc.plan_compute("cuda", True) if c.tags.get("layer") == WEIGHT_DESIGN_LAYER]


def im2col_sample(variant, channels, batch, times):
    params = {"N": batch, "C": channels, "F": channels, "H": 2, "W": 2, "kernel": 7, "stride": 1, "padding": 3}
    return Sample(benchmark="conv2d", variant=variant, params=params, device="cpu", dtype="float32", threads=1,
                  times_s=list(times), extra={"layer": WEIGHT_DESIGN_LAYER, "split": "base"})


def test_im2col_floor_by_hand_and_only_for_the_im2col_regime():
    """t(N) = W (a + N b) per pass at two weights, next to a complete 3x3 design; the floor of a call oneDNN runs as
    im2col + GEMM is W (a' + N b') (interpolated in log W), and a direct-kernel call never gets it."""
    small, large = 160, 640
    samples = []
    for channels in (small, large):
        for batch in (1, 8):
            samples += [design_sample(v, channels, batch, [1e-6] * 3) for v in ("fwd", "bwd_data", "bwd_weight")]
    w_s, w_l = small * small * 196.0, large * large * 196.0
    rates = {"fwd": ((2e-11, 1e-10), (4e-11, 1.2e-10)), "bwd_data": ((3e-11, 1.5e-10), (3e-11, 1.5e-10))}
    for (channels, weight), i in (((small, w_s), 0), ((large, w_l), 1)):
        for variant, per_size in rates.items():
            a, b = per_size[i]
            for batch in (1, 8):
                samples.append(im2col_sample(variant, channels, batch, [weight * (a + batch * b)] * 3))
    fit = host_fit.fit_conv_weight(samples)
    assert fit.weight_bytes == [small * small * 36.0, large * large * 36.0]  # the 3x3 floor keeps its own sizes
    g = fit.im2col
    assert g.weight_bytes == [w_s, w_l]
    assert g.s_per_byte["fwd"] == pytest.approx([2e-11, 4e-11])
    assert g.per_sample_s_per_byte["fwd"] == pytest.approx([1e-10, 1.2e-10])
    assert g.per_sample_s_per_byte["bwd_data"] == pytest.approx([1.5e-10, 1.5e-10])

    wide = {"N": 12, "C": 320, "F": 320, "H": 2, "W": 2, "kernel": 7, "stride": 1, "padding": 3}  # sqrt(160*640)
    weight = 320 * 320 * 196.0
    assert host.weight_floor_s(fit, "conv2d", "fwd", wide, "float32", 1) == pytest.approx(
        weight * (3e-11 + 12 * 1.1e-10))
    assert host.weight_floor_s(fit, "conv2d", "bwd_data", wide, "float32", 1) == pytest.approx(
        weight * (3e-11 + 12 * 1.5e-10))
    # no host threads (a GPU), the weight-gradient pass, a map wide enough for the direct kernel: no im2col floor
    direct = {**wide, "H": 4, "W": 4}
    without = fit.model_copy(update={"im2col": None})
    for pass_, params, threads in (("fwd", wide, None), ("bwd_weight", wide, 1), ("fwd", direct, 1)):
        assert host.weight_floor_s(fit, "conv2d", pass_, params, "float32", threads) == \
            host.weight_floor_s(without, "conv2d", pass_, params, "float32", threads)
    # a profile without the im2col shapes has no im2col floor
    assert host_fit.fit_conv_weight([s for s in samples if s.params["kernel"] == 3]).im2col is None


def test_im2col_floor_of_a_3d_call_streams_the_weight_once_per_output_depth_slice():
    """oneDNN's gemm convolution runs one GEMM per output depth slice (calibrate.backends.host.conv_gemm_slices), so a 3-D
    call's per-sample term is the 2-D rate times its output depth: W (a' + N od b')."""
    sizes = [1e6, 1e8]
    fit = ConvWeightFit(weight_bytes=sizes, s_per_byte={p: [0.0, 0.0] for p in ("fwd", "bwd_data", "bwd_weight")},
                        per_sample_s_per_byte=[0.0, 0.0],
                        im2col=Im2colFloor(weight_bytes=sizes, s_per_byte={"fwd": [2e-11] * 2, "bwd_data": [3e-11] * 2},
                                           per_sample_s_per_byte={"fwd": [1e-10] * 2, "bwd_data": [1.5e-10] * 2}),
                        sources=["by hand"])
    for depth, slices in ((1, 1), (2, 2), (8, 8)):
        params = {"N": 8, "C": 64, "F": 128, "D": depth, "H": 2, "W": 2, "kernel": 7, "stride": 1, "padding": 3}
        assert host.conv_gemm_slices("conv3d", params) == slices
        weight = 64 * 128 * 343 * 4.0
        assert host.weight_floor_s(fit, "conv3d", "fwd", params, "float32", 1) == pytest.approx(
            weight * (2e-11 + 8 * slices * 1e-10))
        assert host.weight_floor_s(fit, "conv3d", "bwd_data", params, "float32", 1) == pytest.approx(
            weight * (3e-11 + 8 * slices * 1.5e-10))
    assert host.conv_gemm_slices("conv2d", {"N": 8, "C": 64, "F": 128, "H": 2, "W": 2, "kernel": 7}) == 1
    # stride and padding along the depth set the slices: (9 + 2 * 1 - 3) // 2 + 1 = 5
    assert host.conv_gemm_slices("conv3d", {"N": 1, "C": 1, "F": 1, "D": 9, "H": 2, "W": 2, "kernel": 3,
                                              "stride": 2, "padding": 1}) == 5
