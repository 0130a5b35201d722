"""Shape features of calibrate.shapes and the host backend (calibrate.backends.host): PyTorch's CPU convolution
regime (checked against the aten op it really runs), oneDNN's GEMM fallbacks (against its verbose log), the
implicit-GEMM view of each pass, and a fit that learns the regime from samples."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile

from calibrate import shapes
from calibrate.backends import host
from calibrate.cost_model import load_cost_model
from calibrate.fit import fit_profile
from calibrate.report import fit_lines
from calibrate.synthetic import noisy_times, profile_with
from profiler.profile import Sample

NATIVE = host.FLOP_FEATURES.index("cpu_native_conv")
# (dims, N, C, spatial, kernel, stride): both sides of every clause of the rule
CASES = [
    (3, 1, 16, 32, 3, 1), (3, 2, 16, 32, 3, 1), (3, 1, 4, 32, 3, 1), (3, 1, 32, 32, 2, 2), (3, 1, 64, 8, 3, 1),
    (3, 1, 16, 36, 3, 1), (3, 1, 4, 8, 5, 1),
    (2, 1, 16, 32, 3, 2), (2, 1, 16, 36, 3, 2), (2, 1, 3, 64, 3, 1), (2, 1, 3, 64, 7, 2), (2, 1, 16, 8, 1, 2),
    (2, 1, 16, 8, 1, 1), (2, 4, 16, 8, 1, 1), (2, 16, 16, 8, 1, 1), (2, 1, 512, 8, 1, 1),
]


def ran_native(dims, n, c, size, kernel, stride) -> bool:
    x = torch.randn(n, c, *[size] * dims)
    w = torch.randn(4, c, *[kernel] * dims)
    conv = F.conv3d if dims == 3 else F.conv2d
    with profile() as prof:
        conv(x, w, stride=stride)
    names = {e.name for e in prof.events()}
    assert names & {"aten::mkldnn_convolution", "aten::thnn_conv2d", "aten::slow_conv3d"}, names
    return "aten::mkldnn_convolution" not in names


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
@pytest.mark.parametrize("threads", [1, 2])
def test_native_conv_rule_matches_the_kernel_pytorch_runs(threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for dims, n, c, size, kernel, stride in CASES:
            op = "conv3d" if dims == 3 else "conv2d"
            spatial = dict(zip("DHW" if dims == 3 else "HW", [size] * dims))
            params = dict(N=n, C=c, F=4, kernel=kernel, stride=stride, padding=0, **spatial)
            predicted = host.cpu_native_conv(op, params, "float32", threads)
            assert predicted == ran_native(dims, n, c, size, kernel, stride), (threads, params)
    finally:
        torch.set_num_threads(before)


# (dims, spatial, kernel, stride): kernels 3-9 with "same" padding over maps 1-6 wide, both strides, maps thin in H
# only or in W only, and 3-D shapes thin in W and in D
GEMM_CASES = [(2, (w, w), k, s) for k in (3, 5, 7, 9) for w in (1, 2, 3, 4, 6) for s in (1, 2)] + [
    (2, (1, 8), 7, 1), (2, (8, 1), 7, 1), (2, (2, 6), 7, 1), (2, (6, 2), 7, 1),
    (3, (8, 8, 1), 5, 1), (3, (8, 1, 8), 5, 1), (3, (2, 2, 2), 5, 1), (3, (3, 3, 3), 7, 2)]


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_onednn_gemm_rule_matches_onednn_verbose(capfd):
    """host.onednn_gemm_conv against the implementation oneDNN's verbose log names for the forward and the
    backward-data pass (x64:gemm:jit or a direct kernel), one thread, 16 channels (a whole SIMD block) and 4."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for channels in (16, 4):
            for dims, spatial, kernel, stride in GEMM_CASES:
                op = "conv3d" if dims == 3 else "conv2d"
                x = torch.randn(2, channels, *spatial)
                w = torch.randn(8, channels, *[kernel] * dims)
                conv = F.conv3d if dims == 3 else F.conv2d
                capfd.readouterr()
                with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                    y = conv(x, w, stride=stride, padding=kernel // 2)
                    torch.ops.aten.convolution_backward(torch.randn_like(y), x, w, None, [stride] * dims,
                                                        [kernel // 2] * dims, [1] * dims, False, [0] * dims, 1,
                                                        [True, False, False])
                log = [line.split(",") for line in capfd.readouterr().out.splitlines()
                       if line.startswith("onednn_verbose") and ",convolution," in line]
                ran = {fields[7]: fields[6] == "x64:gemm:jit" for fields in log}
                params = dict(N=2, C=channels, F=8, kernel=kernel, stride=stride, padding=kernel // 2,
                              **dict(zip("DHW" if dims == 3 else "HW", spatial)))
                for pass_, prop in (("fwd", "forward_training"), ("bwd_data", "backward_data")):
                    assert prop in ran, (params, log)
                    assert host.onednn_gemm_conv(op, pass_, params, "float32", 1) == ran[prop], (pass_, params)
    finally:
        torch.set_num_threads(before)


def test_onednn_gemm_rule_by_hand():
    wide = dict(N=4, C=64, F=64, H=2, W=2, kernel=7, stride=1, padding=3)
    assert host.onednn_gemm_conv("conv2d", "fwd", wide, "float32", 1)
    assert host.onednn_gemm_conv("conv2d", "bwd_data", wide, "float32", 2)
    assert not host.onednn_gemm_conv("conv2d", "bwd_weight", wide, "float32", 1)  # its direct kernel
    assert not host.onednn_gemm_conv("conv2d", "fwd", wide, "float32", None)  # a GPU call
    assert not host.onednn_gemm_conv("conv2d", "fwd", wide, "bfloat16", 1)  # the rule is float32's
    assert not host.onednn_gemm_conv("conv2d", "fwd", {**wide, "groups": 64}, "float32", 1)
    assert not host.onednn_gemm_conv("conv2d", "fwd", {**wide, "W": 3}, "float32", 1)  # padding 3 <= 3 columns
    assert not host.onednn_gemm_conv("gemm", "fwd", dict(M=2, N=2, K=2), "float32", 1)
    # stride 2: the forward output is 1 column wide (padding 3 > 1), backward-data runs another direct kernel
    strided = {**wide, "stride": 2}
    assert host.onednn_gemm_conv("conv2d", "fwd", strided, "float32", 1)
    assert not host.onednn_gemm_conv("conv2d", "bwd_data", strided, "float32", 1)


#: (channels, kernel, padding, stride, (D, H, W)) of 3-D weight gradients: each clause of
#: host.onednn_gemm_weight_grad on both sides (1-3, 4-15 and 16+ channels; thin and deep maps; no padding)
WEIGHT_GRAD_CASES = [(c, k, p, st, sp) for c in (3, 4, 15, 16) for k, p in ((3, 1), (5, 2), (7, 3), (3, 0))
                     for st in (1, 2) for sp in ((2, 2, 2), (4, 4, 4), (2, 6, 6), (6, 2, 2)) if min(sp) + 2 * p >= k]


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_onednn_gemm_weight_grad_rule_matches_onednn_verbose(capfd):
    """host.onednn_gemm_weight_grad against the implementation oneDNN's verbose log names for the 3-D
    weight-gradient pass, one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for channels, kernel, padding, stride, spatial in WEIGHT_GRAD_CASES:
            x = torch.randn(2, channels, *spatial)
            w = torch.randn(8, channels, kernel, kernel, kernel)
            y = F.conv3d(x, w, stride=stride, padding=padding)
            capfd.readouterr()
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch.ops.aten.convolution_backward(torch.randn_like(y), x, w, None, [stride] * 3, [padding] * 3,
                                                    [1] * 3, False, [0] * 3, 1, [False, True, False])
            log = [line.split(",") for line in capfd.readouterr().out.splitlines()
                   if line.startswith("onednn_verbose") and ",convolution," in line and "backward_weights" in line]
            assert log, (channels, kernel, padding, stride, spatial)
            params = dict(N=2, C=channels, F=8, D=spatial[0], H=spatial[1], W=spatial[2], kernel=kernel,
                          stride=stride, padding=padding)
            assert host.onednn_gemm_weight_grad("conv3d", "bwd_weight", params, "float32", 1) == \
                (log[0][6] == "x64:gemm:jit"), (params, log[0][6])
    finally:
        torch.set_num_threads(before)


def test_onednn_gemm_weight_grad_rule_and_its_column_feature_by_hand():
    few = dict(N=236, C=4, F=4, D=16, H=16, W=16, kernel=5, stride=1, padding=2)
    assert host.onednn_gemm_weight_grad("conv3d", "bwd_weight", few, "float32", 1)
    assert not host.onednn_gemm_weight_grad("conv3d", "fwd", few, "float32", 1)  # its forward is direct
    assert not host.onednn_gemm_weight_grad("conv3d", "bwd_weight", few, "float32", None)  # a GPU call
    assert not host.onednn_gemm_weight_grad("conv3d", "bwd_weight", {**few, "padding": 0}, "float32", 1)
    assert not host.onednn_gemm_weight_grad("conv3d", "bwd_weight", {**few, "C": 16}, "float32", 1)
    assert not host.onednn_gemm_weight_grad("conv3d", "bwd_weight", {**few, "C": 3}, "float32", 1)
    assert not host.onednn_gemm_weight_grad("conv2d", "bwd_weight", {**few, "D": None}, "float32", 1)
    # 92 channels, 7x7x7 with padding 3 on a 2x2x2 map: the first window reaches past the depth (2 <= 7 - 3)
    thin = dict(N=22, C=92, F=182, D=2, H=2, W=2, kernel=7, stride=1, padding=3)
    assert host.onednn_gemm_weight_grad("conv3d", "bwd_weight", thin, "float32", 1)
    assert not host.onednn_gemm_weight_grad("conv3d", "bwd_weight", {**thin, "D": 5}, "float32", 1)
    column = host.FLOP_FEATURES.index("log_native_columns")
    row = host.work("conv3d", "bwd_weight", few, "float32", threads=1, lanes=16)
    assert row["features"][column] == pytest.approx(np.log10(236 * 4 * 125 * 16 ** 3))
    assert row["features"][NATIVE] == 0.0
    assert row["work"] == row["flops"]  # a GEMM over the columns: no SIMD-lane padding of C or F
    assert host.work("conv3d", "fwd", few, "float32", threads=1, lanes=16)["features"][column] == 0.0


def test_in_bounds_taps_by_hand_and_in_a_host_calls_work():
    """7x7 with padding 3 on a 4-wide map: every output position reads 4 of its 7 taps per dimension; a 3x3
    "same" convolution on 56^2 loses one tap row and column at each edge; a 1x1 loses none; stride 2 on 8 with
    padding 1 loses the first position's first tap (11 of 12)."""
    assert host.in_bounds_tap_fraction([4, 4], [7, 7], [1, 1], [3, 3]) == pytest.approx(16 / 49)
    assert host.in_bounds_tap_fraction([56, 56], [3, 3], [1, 1], [1, 1]) == pytest.approx((1 - 2 / (56 * 3)) ** 2)
    assert host.in_bounds_tap_fraction([5, 5], [1, 1], [1, 1], [0, 0]) == 1.0
    assert host.in_bounds_tap_fraction([8], [3], [2], [1]) == pytest.approx(11 / 12)
    params = dict(N=66, C=32, F=64, H=4, W=4, kernel=7, stride=1, padding=3)  # whole 16-lane blocks: no padding
    on_host = host.work("conv2d", "fwd", params, "float32", threads=1, lanes=16)
    gpu = shapes.work("conv2d", "fwd", params, "float32")
    assert gpu["work"] == gpu["flops"]
    assert on_host["work"] == pytest.approx(on_host["flops"] * 16 / 49)
    # the im2col path (a 2x2 map, padding 3 wider than it) multiplies the zeros: every tap counts
    wide = host.work("conv2d", "fwd", {**params, "H": 2, "W": 2}, "float32", threads=1, lanes=16)
    assert wide["work"] == wide["flops"]


def test_native_feature_is_set_only_on_the_host():
    small = dict(N=1, C=4, F=8, D=8, H=8, W=8, kernel=3, stride=1, padding=1)
    assert host.work("conv3d", "fwd", small, "float32", threads=1)["features"][NATIVE] == 1.0
    assert host.work("conv3d", "fwd", small, "float32", threads=None)["features"][NATIVE] == 0.0  # rules off
    assert len(shapes.work("conv3d", "fwd", small, "float32")["features"]) == NATIVE  # a GPU has no such column
    assert host.work("conv3d", "fwd", {**small, "N": 2}, "float32", threads=1)["features"][NATIVE] == 0.0
    assert not host.cpu_native_conv("conv3d", small, "bfloat16", 1)  # the rule is float32's
    assert host.work("gemm", "fwd", dict(M=1, N=1, K=1), "float32", threads=1)["features"][NATIVE] == 0.0


def test_bwd_data_features_describe_the_gemm_it_runs():
    """fwd: Y (N*out x F) = X (N*out x C*k) W; bwd_data: dX (N*in x C) = dY (N*out x F*k) W, so C and F trade
    places as reduction and output widths, and the spatial size is the input's."""
    params = dict(N=2, C=3, F=64, H=16, W=16, kernel=3, stride=2, padding=1)
    names = shapes.FLOP_FEATURES
    fwd = dict(zip(names, shapes.work("conv2d", "fwd", params, "float32")["features"]))
    bwd = dict(zip(names, shapes.work("conv2d", "bwd_data", params, "float32")["features"]))
    assert (fwd["log_in_channels"], fwd["log_out_channels"]) == (bwd["log_out_channels"], bwd["log_in_channels"])
    assert fwd["log_min_dim"] == pytest.approx(np.log10(3 * 9))  # C*kvol = 27 < F = 64 < N*out = 128
    assert bwd["log_min_dim"] == pytest.approx(np.log10(3))  # C = 3 is the output width of dX
    assert (fwd["log_spatial"], bwd["log_spatial"]) == pytest.approx((np.log10(64), np.log10(256)))
    assert fwd["log_flops"] == bwd["log_flops"]


def test_native_column_buffer_feature_by_hand():
    """A native-kernel conv's im2col buffer is N*C*prod(kernel)*output positions elements; oneDNN convs,
    GPU calls and GEMMs have none (the feature is 0)."""
    column = host.FLOP_FEATURES.index("log_native_columns")
    native = dict(N=1, C=32, F=4, D=8, H=8, W=8, kernel=3, stride=1, padding=1)  # out 8^3, 32*27*512 columns
    strided = dict(N=1, C=16, F=4, D=8, H=8, W=8, kernel=3, stride=2, padding=1)  # out 4^3: 16*27*64
    for pass_ in ("fwd", "bwd_data", "bwd_weight"):
        row = host.work("conv3d", pass_, native, "float32", threads=1)["features"]
        assert row[NATIVE] == 1.0 and row[column] == pytest.approx(np.log10(32 * 27 * 512))
    assert host.work("conv3d", "fwd", strided, "float32", threads=1)["features"][column] == \
        pytest.approx(np.log10(16 * 27 * 64))
    assert host.work("conv3d", "fwd", {**native, "N": 2}, "float32", threads=1)["features"][column] == 0.0
    assert host.work("conv3d", "fwd", native, "float32", threads=None)["features"][column] == 0.0  # rules off
    assert host.work("gemm", "fwd", dict(M=64, N=64, K=64), "float32", threads=1)["features"][column] == 0.0


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_a_fit_learns_the_native_kernel_regime():
    """CPU samples where PyTorch's native kernels run 5x slower than oneDNN: unseen shapes on both sides of
    the rule are predicted at their own rate, through the host thread count the profile records."""
    rng = np.random.default_rng(3)

    def true_s(params):
        w = host.work("conv3d", "fwd", params, "float32", threads=1)
        return w["flops"] / (20e9 if w["features"][NATIVE] else 100e9)

    grid = [dict(N=n, C=c, F=f, D=s, H=s, W=s, kernel=3, stride=1, padding=1)
            for n in (1, 2, 4) for c in (4, 16, 32) for f in (8, 32) for s in (4, 8, 16)]
    samples = [Sample(benchmark="conv3d", variant="fwd", device="cpu", dtype="float32", threads=1, params=p,
                      times_s=noisy_times(true_s(p), rng, 0.03, 7)) for p in grid]
    fitted = fit_profile(profile_with(samples))
    cost_model = load_cost_model(fitted)
    assert cost_model.coefficients.host_threads == 1
    quality = cost_model.coefficients.compute["conv3d/fwd/float32"].quality  # held out apart per kernel
    assert set(quality.by_kernel) == {"oneDNN", "native"}
    assert min(quality.by_kernel.values()) <= quality.median_rel_error <= max(quality.by_kernel.values())
    assert "(oneDNN shapes" in next(line for line in fit_lines(fitted) if "conv3d/fwd" in line)
    native = dict(N=1, C=8, F=16, D=8, H=8, W=8, kernel=3, stride=1, padding=1)
    onednn = {**native, "N": 3}
    assert host.cpu_native_conv("conv3d", native, "float32", 1)
    assert not host.cpu_native_conv("conv3d", onednn, "float32", 1)
    for params in (native, onednn):
        predicted = cost_model.compute_time_s("conv3d", "fwd", params, "float32")
        assert predicted == pytest.approx(true_s(params), rel=0.25), params


def test_lane_padding_by_hand():
    """AVX-512 blocks of 16 float32 lanes: forward and backward-weight pad F, and C once it is more than one
    block (a first layer of 3-16 channels is read unpadded); backward-data pads C and F."""
    assert host.simd_lanes("AVX512") == 16 and host.simd_lanes("AVX2") == 8
    assert host.simd_lanes("DEFAULT") is None and host.simd_lanes(None) is None
    assert host.lane_padded_channels("fwd", 4, 8, 16) == (4, 16)
    assert host.lane_padded_channels("bwd_weight", 20, 33, 16) == (32, 48)
    assert host.lane_padded_channels("fwd", 16, 33, 16) == (16, 48)  # one whole block: nothing to pad
    assert host.lane_padded_channels("fwd", 98, 48, 16) == (112, 48)
    assert host.lane_padded_channels("bwd_data", 4, 8, 16) == (16, 16)
    params = dict(N=2, C=4, F=8, H=16, W=16, kernel=3, stride=1, padding=1)
    flops = 2.0 * 2 * 8 * 4 * 9 * 256
    taps = host.in_bounds_tap_fraction([16, 16], [3, 3], [1, 1], [1, 1])  # oneDNN skips the padding's taps
    on_host = host.work("conv2d", "fwd", params, "float32", threads=2, lanes=16)
    assert on_host["flops"] == flops and on_host["work"] == pytest.approx(flops * 2 * taps)
    assert on_host["features"][0] == pytest.approx(np.log10(flops * 2 * taps))
    assert host.work("conv2d", "bwd_data", params, "float32", threads=2, lanes=16)["work"] == \
        pytest.approx(flops * 8 * taps)
    assert host.work("conv2d", "fwd", params, "float32", threads=None, lanes=16)["work"] == flops  # rules off
    assert shapes.work("conv2d", "fwd", params, "float32")["work"] == flops  # a GPU: no host lanes
    assert host.work("conv2d", "fwd", params, "float32", threads=2)["work"] == flops  # ISA unknown
    native = {**params, "N": 1}
    assert host.cpu_native_conv("conv2d", native, "float32", 1)
    assert host.work("conv2d", "fwd", native, "float32", threads=1, lanes=16)["work"] == flops / 2


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_a_fit_pads_filters_to_the_recorded_lanes():
    """Samples from a host that computes F in blocks of 16 (time = padded FLOPs / rate): with the profile's
    cpu_capability recorded, a filter count below every measured one (F = 2) is predicted at the padded cost;
    fitted on true FLOPs, the monotone efficiency cannot rise as F shrinks and predicts it several times too fast."""
    rng = np.random.default_rng(5)

    def true_s(params):
        return 2.0 * params["N"] * -(-params["F"] // 16) * 16 * params["C"] * 9 * params["H"] ** 2 / 100e9

    grid = [dict(N=n, C=c, F=f, H=s, W=s, kernel=3, stride=1, padding=1)
            for n in (2, 4) for c in (16, 32) for f in (8, 16, 24, 32, 48) for s in (8, 16, 32)]
    samples = [Sample(benchmark="conv2d", variant="fwd", device="cpu", dtype="float32", threads=2, params=p,
                      times_s=noisy_times(true_s(p), rng, 0.03, 7)) for p in grid]
    profile = profile_with(samples)
    unseen = dict(N=3, C=16, F=2, H=16, W=16, kernel=3, stride=1, padding=1)
    padded = load_cost_model(fit_profile(profile.model_copy(update={"machine": profile.machine.model_copy(
        update={"cpu_capability": "AVX512"})})))
    assert padded.coefficients.host_simd_lanes == 16
    assert padded.compute_time_s("conv2d", "fwd", unseen, "float32") == pytest.approx(true_s(unseen), rel=0.2)
    unpadded = load_cost_model(fit_profile(profile))
    assert unpadded.coefficients.host_simd_lanes is None
    assert unpadded.compute_time_s("conv2d", "fwd", unseen, "float32") < 0.5 * true_s(unseen)
