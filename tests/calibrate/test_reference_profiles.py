"""The published reference profiles: loadable, marked published, sourced, and costing every op/pass/dtype."""

import pytest

from calibrate.cost_api import COLLECTIVES, PASSES
from calibrate.cost_model import load_cost_model
from calibrate.published import KERNEL_LAUNCH, NODES, build_profile, read_fitted, render
from calibrate.system_constants import SystemConstants, for_family, gpu_family, load_constants
from calibrate.report import fit_lines
from calibrate.shipped import shipped_profiles_dir
from predictor.published.fit import CONSTANTS_FILE  # the fitted constants are the predictor's data
from profiler.profile import load_profile

PROFILES = shipped_profiles_dir()
EXPECTED = {"v100-abci-4gpu.published.yaml": (4, 16), "v100-dgx1-8gpu.published.yaml": (8, 16),
            "a100-dgx-8gpu.published.yaml": (8, 40), "h100-dgx-8gpu.published.yaml": (8, 80),
            "v100-dgx1-1edr-8gpu.published.yaml": (8, 16), "v100-dgx2-16gpu.published.yaml": (16, 32),
            "a100-80gb-dgx-8gpu.published.yaml": (8, 80), "a100-sxm-4gpu-2hdr.published.yaml": (4, 40),
            "a100-pcie-8gpu-1edr.published.yaml": (8, 40), "a100-pcie-4gpu-1edr.published.yaml": (4, 80),
            "p100-dgx1-8gpu.published.yaml": (8, 16), "a100-40gb-4hdr-8gpu.published.yaml": (8, 40),
            "a100-80gb-4hdr-8gpu.published.yaml": (8, 80)}


def datasheet(file: str):
    """The cost model of a node's profile from published hardware figures only (no corpus constant)."""
    return load_cost_model(build_profile(next(n for n in NODES if n.file == file), None))
CONV2D = dict(N=32, C=64, F=64, H=56, W=56, kernel=3, stride=1, padding=1)
SHAPES = {"gemm": dict(M=256, N=1024, K=1024), "linear": dict(M=256, N=1000, K=2048), "conv2d": CONV2D,
          "conv3d": dict(N=2, C=16, F=32, D=32, H=32, W=32, kernel=3, stride=1, padding=1),
          "batchnorm": dict(N=32, C=64, H=56, W=56), "relu": dict(N=32, C=64, H=56, W=56),
          "maxpool": dict(N=32, C=64, H=56, W=56, kernel=2, stride=2), "avgpool": dict(N=32, C=64, H=56, W=56, kernel=2),
          "add": dict(N=32, C=64, H=56, W=56)}


def net(n_or_shape, rate):
    """A measured product's FLOP/s net of the launch floor (calibrate.published.net_rate), by hand."""
    flops = 2 * (n_or_shape ** 3 if isinstance(n_or_shape, int) else n_or_shape[0] * n_or_shape[1] * n_or_shape[2])
    return flops / (flops / rate - KERNEL_LAUNCH.value)


def test_matrix_products_run_at_the_measured_share_of_the_plateau_by_size():
    """V100 FP16 torch.matmul measured 57.3, 78.2, 95.7 and 97.4 TFLOP/s at 1024^3 ... 8192^3 (GPU.gemm_by_size):
    a product of those sizes runs in its measured time (its rate net of the launch floor, at that share of the
    plateau, plus the floor), larger ones at the plateau; convolutions keep the plateau; A100 BF16 takes the FP16
    sweep's shares of its own plateau (271.2 TFLOP/s)."""
    cm = datasheet("v100-dgx1-8gpu.published.yaml")
    top = net(8192, 97.4e12)
    for n, measured in ((1024, 57.3e12), (2048, 78.2e12), (4096, 95.7e12), (8192, 97.4e12)):
        t = cm.compute_time_s("gemm", "fwd", dict(M=n, N=n, K=n), "float16")
        assert t - KERNEL_LAUNCH.value == pytest.approx(2 * n ** 3 / (97.4e12 * net(n, measured) / top), rel=1e-6), n
        assert t == pytest.approx(2 * n ** 3 / measured, rel=1e-3), n  # the measured time, to the plateau's rounding
    t = cm.compute_time_s("gemm", "fwd", dict(M=16384, N=16384, K=16384), "float16")
    assert t - KERNEL_LAUNCH.value == pytest.approx(2 * 16384 ** 3 / 97.4e12, rel=1e-6)  # the plateau
    # 8192 x 768 x 768 (a BERT-base projection): 9.7 GFLOP, nearer 2048^3 (17 GFLOP) than 1024^3 in log FLOPs
    t = cm.compute_time_s("gemm", "fwd", dict(M=8192, N=768, K=768), "float16")
    assert t - KERNEL_LAUNCH.value == pytest.approx(2 * 8192 * 768 * 768 / (97.4e12 * net(2048, 78.2e12) / top),
                                                    rel=1e-6)
    conv = dict(N=64, C=256, F=256, H=14, W=14, kernel=3, stride=1, padding=1)  # 118 GFLOP
    fp16_conv = cm.compute_time_s("conv2d", "fwd", conv, "float16")
    a100 = datasheet("a100-dgx-8gpu.published.yaml")
    small = dict(M=1024, N=1024, K=1024)
    share = net(1024, 119.4e12) / net(16384, 256.5e12)
    assert a100.compute_time_s("gemm", "fwd", small, "bfloat16") - KERNEL_LAUNCH.value == pytest.approx(
        2 * 1024 ** 3 / (271.2e12 * share), rel=1e-6)  # BF16: the FP16 sweep's share of its own plateau
    assert a100.compute_time_s("gemm", "fwd", small, "float16") == pytest.approx(2 * 1024 ** 3 / 119.4e12, rel=2e-3)
    flops = 2 * 64 * 256 * 256 * 9 * 14 * 14
    assert fp16_conv - KERNEL_LAUNCH.value == pytest.approx(flops / 97.4e12, rel=1e-6)  # the plateau


def test_h100_products_run_at_their_measured_share_of_the_plateau_by_m_n_k():
    """OpenXLA's H100 table (GPU.gemm_grid): bf16 4096^3 at 780.2 TFLOP/s sets the MAMF plateau (794.5 of 989.4);
    4096 x 4096 x 1024 measured 685.2, so it runs at its share of the plateau (both rates net of the launch floor) and
    in its measured time; 4096 x 4096 x 1448 (halfway in log2 between K 1024 and 2048, measured 685.2 and 735.6) at the
    geometric mean of the two shares; M beyond the table (49152 rows) takes its 4096-row edge; FP16 takes the bf16
    column; 8192 x 8192 x 512 has 4096^3's FLOPs but runs at 4096 x 4096 x 512's share."""
    cm = datasheet("h100-dgx-8gpu.published.yaml")
    plateau = 794.5e12
    top = net(4096, 7.80194e14)

    def rate(m, n, k, dtype="bfloat16"):
        return 2 * m * n * k / (cm.compute_time_s("gemm", "fwd", dict(M=m, N=n, K=k), dtype) - KERNEL_LAUNCH.value)
    assert rate(4096, 4096, 4096) == pytest.approx(plateau, rel=1e-6)
    k1024 = net((4096, 4096, 1024), 6.85221e14) / top
    assert rate(4096, 4096, 1024) == pytest.approx(plateau * k1024, rel=1e-6)
    t = cm.compute_time_s("gemm", "fwd", dict(M=4096, N=4096, K=1024), "bfloat16")
    assert t == pytest.approx(2 * 4096 * 4096 * 1024 / 6.85221e14, rel=0.02)  # the measured time, MAMF for XLA's top
    k2048 = net((4096, 4096, 2048), 7.35566e14) / top
    assert rate(4096, 4096, round(2 ** 10.5)) == pytest.approx(plateau * (k1024 * k2048) ** 0.5, rel=2e-3)
    assert rate(49152, 4096, 1024) == pytest.approx(rate(4096, 4096, 1024), rel=1e-6)
    assert rate(4096, 4096, 1024, "float16") == pytest.approx(rate(4096, 4096, 1024), rel=1e-6)
    assert rate(8192, 8192, 512) == pytest.approx(plateau * net((4096, 4096, 512), 5.51769e14) / top, rel=1e-6)


def test_h100_fp8_products_are_the_bf16_ones_carried_by_the_kernel_model():
    """FP8 on the H100 (gemm_grid.float8 via_kernel_model): each measured bf16 product's time times the kernel model's
    FP8 time over its bf16 time, the model fitted to the bf16 column, its main loop at the FP8 peak and at FP8's MAMF
    fraction over BF16's (1402.6 / 794.5 of their peaks), floors unchanged. By hand at 4096 x 4096 x 1024 from the
    model's own pieces; then the physics: the large products gain about the plateaus' ratio (1.77x), a 512-deep one
    less, a 256^3 one (launch-bound) nearly nothing."""
    from calibrate import gpu_kernels, gpu_specs
    from calibrate.published import _column_fit, converted_rates
    from calibrate.systems import load_gpus
    from calibrate.xla_matmul import grid

    gpu = load_gpus()["H100-SXM5-80GB"]
    table = gpu.gemm_grid["float8"]
    assert table.via_kernel_model and not gpu.gemm_grid["bfloat16"].via_kernel_model
    rates, (_, bf16) = converted_rates(gpu, "float8", table), grid("sm_90", "bfloat16")
    values = dict(_column_fit(gpu.name, "sm_90", "bfloat16"))
    hw = gpu_specs.hardware(gpu_specs.find_spec(gpu.name), "bfloat16")
    fp8 = dict(values, efficiency=values["efficiency"] * (1402.6 / 1978.9) / (794.5 / 989.4))
    shape = dict(M=4096, N=4096, K=1024)
    ratio = (gpu_kernels.kernel_time_s(fp8, hw._replace(peak_flops_per_s=1978.9e12), "gemm", "fwd", shape, "float8")
             / gpu_kernels.kernel_time_s(values, hw, "gemm", "fwd", shape, "bfloat16"))
    assert rates[(4096, 4096, 1024)] == pytest.approx(bf16[(4096, 4096, 1024)] / ratio, rel=1e-3)
    gain = {s: rates[s] / bf16[s] for s in ((4096,) * 3, (4096, 4096, 512), (256,) * 3)}
    plateaus = (1402.6 / 1978.9) / (794.5 / 989.4) * 2
    assert 0.85 * plateaus < gain[(4096,) * 3] <= plateaus * 1.01
    assert 1.0 < gain[(4096, 4096, 512)] < gain[(4096,) * 3]
    assert gain[(256,) * 3] < 1.2


def test_dgx1_sub_groups_take_their_links_bus_bandwidth():
    """DGX-1's hybrid cube mesh (nodes.yaml allreduce_bus_bytes_per_s_by_group, vTrain's measured V100 sweep): 2 GPUs
    share one NVLink 2 (22.55 GB/s bus), 4 of a quad 85.36, 8 the node's 134.51; the same 1 GB all-reduce's bandwidth
    term is S * 2(n-1)/n over each; point-to-point keeps its own figure; an HGX A100 4-GPU node has no groups."""
    cm = datasheet("v100-dgx1-8gpu.published.yaml")
    size = 1e9

    def bandwidth_s(n, nodes=1):
        latency = cm.collective_time_s("allreduce", 1.0, n, nodes)  # a 1-byte call: the latency alone (to 1e-10 s)
        return cm.collective_time_s("allreduce", size, n, nodes) - latency
    assert bandwidth_s(2) == pytest.approx(size / 22.55e9, rel=1e-3)
    assert bandwidth_s(4) == pytest.approx(size * 1.5 / 85.36e9, rel=1e-3)
    assert bandwidth_s(8) == pytest.approx(size * 1.75 / 134.51e9, rel=1e-3)
    assert cm.collective_time_s("allgather", size, 2) > cm.collective_time_s("allgather", size, 8) / 2
    assert cm.coefficients.links["sendrecv"]["intra"].bus_bandwidth_by_group == {}  # point-to-point: its own figure
    hgx4 = datasheet("a100-sxm-4gpu-2hdr.published.yaml")  # `like: a100-dgx-8gpu`, its own (empty) groups
    assert hgx4.coefficients.links["allreduce"]["intra"].bus_bandwidth_by_group == {}
    assert datasheet("a100-dgx-8gpu.published.yaml").coefficients.links["allreduce"]["intra"] \
        .bus_bandwidth_by_group[2].value == 197.28e9
    v100_1edr = datasheet("v100-dgx1-1edr-8gpu.published.yaml")  # `like: v100-dgx1-8gpu` takes the mesh
    assert v100_1edr.coefficients.links["allreduce"]["intra"].bus_bandwidth_by_group[2].value == 22.55e9
    assert datasheet("p100-dgx1-8gpu.published.yaml").coefficients.links["allreduce"]["intra"] \
        .bus_bandwidth_by_group[4].value == pytest.approx(35.88e9)


def test_an_all_to_all_across_nodes_is_bound_by_each_ranks_nic_by_hand():
    """DGX H100: 8 x 400 Gb/s per node, 50 GB/s a GPU (the inter-node send/recv link). An all-to-all of S bytes a
    rank over 16 ranks on 2 nodes sends half of S through its NIC: S/2 / 50 GB/s of bandwidth time (plus the
    link's fill start-up), well above the all-reduce's 320 GB/s inter-node bus rate a reduction inside the node
    allows; inside one node it keeps NVLink's figure."""
    cm = datasheet("h100-dgx-8gpu.published.yaml")
    size, nic = 1e9, cm.coefficients.links["sendrecv"]["inter"].bus_bandwidth_bytes_per_s.value
    link = cm.coefficients.links["alltoall"]["inter"]
    bandwidth_s = (cm.collective_time_s("alltoall", size, 16, 2) - cm.collective_time_s("alltoall", 1.0, 16, 2)
                   - min(size / 2 / nic, link.fill_latency_s.value))
    assert nic == 50e9 and bandwidth_s == pytest.approx(size / 2 / nic, rel=1e-3)
    eight = cm.collective_time_s("alltoall", size, 64, 8) - cm.collective_time_s("alltoall", 1.0, 64, 8)
    assert eight - link.fill_latency_s.value == pytest.approx(size * 56 / 64 / nic, rel=1e-3)
    intra = cm.coefficients.links["alltoall"]["intra"].bus_bandwidth_bytes_per_s.value
    one = cm.collective_time_s("alltoall", size, 8, 1) - cm.collective_time_s("alltoall", 1.0, 8, 1)
    assert one == pytest.approx(size * 7 / 8 / intra, rel=1e-3)
    # an all-gather still takes the inter-node bus rate (a node receives the other nodes' shards on all its NICs)
    ag = cm.collective_time_s("allgather", size, 16, 2) - cm.collective_time_s("allgather", 1.0, 16, 2)
    assert ag < bandwidth_s


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_profile_is_published_and_complete(name):
    path = PROFILES / name
    profile = load_profile(path)
    assert profile.provenance.kind == "published" and not profile.samples
    cm = load_cost_model(path)
    devices, gib = EXPECTED[name]
    assert cm.devices_per_node == devices and cm.device_memory_bytes == gib * 2**30 and cm.provenance == "published"
    published_dtypes = {key.rsplit("/", 1)[1] for key in profile.coefficients["compute"]}
    assert {"float32", "float16"} <= published_dtypes  # bfloat16 and tf32 only where the GPU has them
    for op, params in SHAPES.items():
        for pass_ in PASSES:
            for dtype in sorted(published_dtypes):
                t = cm.compute_time_s(op, pass_, params, dtype)
                assert t >= 0 and (t > 0 or (op, pass_) in {(o, "bwd_weight") for o in SHAPES} | {("add", "bwd_data")})
    for op in COLLECTIVES:
        intra = cm.collective_time_s(op, 64e6, devices, 1)
        inter = cm.collective_time_s(op, 64e6, 4 * devices, 4)
        assert 0 < intra < inter, op
        swept = op == "allreduce" and any(n.allreduce_sweep for n in NODES if n.file == name)  # its own measured sweep
        assert cm.collective_source(op, devices) == ("measured" if swept else "extrapolated")
    assert cm.host_device_time_s(1e9) > 0 and cm.memory_time_s(1e9) > 0
    assert cm.memory_time_s(1e9, where="host") > cm.memory_time_s(1e9)  # host DRAM is slower than HBM
    assert fit_lines(profile)[0].startswith("PUBLISHED profile")


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.file)
def test_files_match_the_generator(node):
    assert (PROFILES / node.file).read_text() == render(node, **read_fitted(CONSTANTS_FILE)), \
        "run `python -m calibrate.published --constants predictor/data/system_constants.yaml`"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_coefficient_has_a_source(name):
    c = load_profile(PROFILES / name).coefficients
    fits = list(c["compute"].values()) + list(c["memory"].values()) + list(c["host_device"].values())
    fits += [link for levels in c["links"].values() for link in levels.values()]
    assert fits and all(f["sources"] for f in fits)


def test_published_figures_reproduce_their_sources():
    """Spot checks against the figures the `sources` name: the roofline at large GEMMs gives the quoted throughput."""
    a100 = datasheet("a100-dgx-8gpu.published.yaml")
    n = 16384
    t = a100.compute_time_s("gemm", "fwd", dict(M=n, N=n, K=n), "float16")
    assert 2 * n**3 / (t - KERNEL_LAUNCH.value) == pytest.approx(256.5e12, rel=1e-6)  # Azure cuBLASLt FP16 @16k^3
    tiny = a100.compute_time_s("gemm", "fwd", dict(M=1, N=1, K=1), "float16")
    assert KERNEL_LAUNCH.value <= tiny < 1.01 * KERNEL_LAUNCH.value  # a null-sized kernel costs the launch floor
    s = 2**30
    busbw = s * 2 * 7 / 8 / a100.collective_time_s("allreduce", s, 8)
    assert busbw == pytest.approx(229.35e9, rel=0.01)  # vTrain LUT at 1 GiB, minus the latency term
    h100 = datasheet("h100-dgx-8gpu.published.yaml")
    assert 1e9 / h100.memory_time_s(1e9) == pytest.approx(2970e9, rel=1e-9)


def test_shipped_profiles_are_the_datasheet_times_the_fitted_constants():
    """A shipped profile's compute time is the datasheet one times its GPU family's fitted time scale (grouped
    convolutions their own), and every family constant names the rows it was fitted to."""
    constants = load_constants(CONSTANTS_FILE)
    assert constants and all(c.rows == len(c.row_ids) > 0 and c.fitted_sources for c in constants.values())
    conv = dict(N=32, C=64, F=64, H=56, W=56, kernel=3, stride=1, padding=1)
    for file in ("a100-dgx-8gpu.published.yaml", "v100-dgx1-8gpu.published.yaml"):
        node = next(n for n in NODES if n.file == file)
        family = constants[gpu_family(node.gpu.name)]
        shipped, base = load_cost_model(PROFILES / file), datasheet(file)
        for dtype, scale in family.flops_time_scale.items():
            assert shipped.compute_time_s("conv2d", "fwd", conv, dtype) == pytest.approx(
                scale * base.compute_time_s("conv2d", "fwd", conv, dtype), rel=1e-9)
        for dtype, scale in family.grouped_time_scale.items():
            grouped = dict(conv, groups=64)
            assert shipped.compute_time_s("conv2d", "fwd", grouped, dtype) == pytest.approx(
                scale * base.compute_time_s("conv2d", "fwd", grouped, dtype), rel=1e-9)


def test_profiles_without_constants_are_the_datasheet_and_unfitted_families_take_the_fleet():
    """No constants at all: the datasheet profile. Constants of another family only: this family's profile takes
    the fleet's (calibrate.system_constants.for_family), here X100's 2.0 for every dtype."""
    node = NODES[0]
    assert "time scale" not in render(node, {})
    other = {"X100": SystemConstants(family="X100", flops_time_scale={"float32": 2.0}, rows=4, fitted_sources=("s",))}
    conv = dict(N=32, C=64, F=64, H=56, W=56, kernel=3, stride=1, padding=1)
    fleet = load_cost_model(build_profile(node, for_family(other, gpu_family(node.gpu.name))))
    bare = load_cost_model(build_profile(node, None))
    for dtype in ("float32", "float16"):
        assert fleet.compute_time_s("conv2d", "fwd", conv, dtype) == pytest.approx(
            2.0 * bare.compute_time_s("conv2d", "fwd", conv, dtype), rel=1e-9)
    assert "fleet_constants" in render(node, other)  # the source says where the scale came from


def test_float32_3x3_stride1_convolutions_cost_the_winograd_reduction_by_hand():
    """A published GPU runs float32 3x3 stride-1 convolutions as Winograd F(2x2, 3x3): 16 multiplications for
    the 36 of a direct 3x3 convolution over a 2x2 output tile, so the same call costs 36/16 less compute; a
    strided, 1x1, grouped or tensor-core (fp16, TF32) convolution keeps the direct-convolution cost."""
    import math

    from calibrate import shapes
    from calibrate.backends.gpu import winograd_eligible

    cm = datasheet("v100-dgx1-8gpu.published.yaml")
    work = shapes.work("conv2d", "fwd", CONV2D, "float32")

    def roofline(dtype: str, reduction: float) -> float:
        fit = cm.coefficients.compute[f"conv2d/fwd/{dtype}"]
        rate = reduction * fit.peak_per_s * math.exp(fit.efficiency.init)
        return fit.launch_s.value + max(work["work"] / rate, work["bytes"] / fit.memory_bandwidth_bytes_per_s)

    assert cm.compute_time_s("conv2d", "fwd", CONV2D, "float32") == pytest.approx(roofline("float32", 36 / 16))
    assert roofline("float32", 36 / 16) < roofline("float32", 1.0) / 2
    assert cm.compute_time_s("conv2d", "fwd", CONV2D, "float16") == pytest.approx(roofline("float16", 1.0))
    assert winograd_eligible("conv2d", CONV2D, "float32")
    for op, params, dtype in (("conv2d", CONV2D | {"stride": 2}, "float32"),
                              ("conv2d", CONV2D | {"kernel": 1, "padding": 0}, "float32"),
                              ("conv2d", CONV2D | {"groups": 32}, "float32"), ("conv2d", CONV2D, "float16"),
                              ("conv2d", CONV2D, "tf32"), ("conv3d", CONV2D | {"D": 8}, "float32")):
        assert not winograd_eligible(op, params, dtype), (op, params, dtype)


def test_family_constants_scale_convolutions_not_matrix_products():
    """The GPU-family time scale (fitted to CNN training runs: what a convolution loses against the measured GEMM
    fraction) multiplies the shipped profile's convolution fits and leaves its GEMM fits at the datasheet."""
    from calibrate import shapes

    node = next(n for n in NODES if n.file == "a100-dgx-8gpu.published.yaml")
    shipped = load_cost_model(PROFILES / node.file).coefficients.compute
    bare = load_cost_model(build_profile(node, None)).coefficients.compute
    scale = load_constants(CONSTANTS_FILE)["A100"].flops_time_scale["float16"]
    assert scale != pytest.approx(1.0)
    assert shipped["conv2d/fwd/float16"].time_scale.value == pytest.approx(bare["conv2d/fwd/float16"].time_scale.value * scale)
    assert shipped["gemm/fwd/float16"].time_scale.value == pytest.approx(bare["gemm/fwd/float16"].time_scale.value)
    assert "gemm" in shapes.MATMUL_OPS and "conv2d" not in shapes.MATMUL_OPS


def test_grouped_convolutions_stream_at_the_measured_share_by_hand():
    """A published GPU's grouped convolution is memory-bound at the depthwise share (figures.yaml: 0.33 forward, 0.17
    each backward pass, of the V100S triad 1025.6 GB/s where they were measured) scaled by SMs x clock: a depthwise
    call over a 128 x 32 x 112^2 float32 map moves 2 x 205.5 MB of activations and 1,152 B of weights per pass, on a
    V100 (80 SMs at 1530 MHz against the V100S's 80 at 1597) 1.27 ms forward and 2.46 ms per backward pass, plus the
    launch floor; a dense call keeps the full triad."""
    from calibrate.published import GROUPED_TRIAD_SHARE

    cm = datasheet("v100-dgx1-8gpu.published.yaml")
    depthwise = {"N": 128, "C": 32, "H": 112, "W": 112, "F": 32, "kernel": 3, "stride": 1, "padding": 1, "groups": 32}
    nbytes = (2 * 128 * 32 * 112 * 112 + 32 * 9) * 4
    assert GROUPED_TRIAD_SHARE["fwd"].value == pytest.approx(0.33)
    assert GROUPED_TRIAD_SHARE["bwd_data"].value == GROUPED_TRIAD_SHARE["bwd_weight"].value == pytest.approx(0.17)
    v100_rate = 1025.6e9 * 1530 / 1597
    for pass_, expected_s in (("fwd", 1.268e-3), ("bwd_data", 2.461e-3), ("bwd_weight", 2.461e-3)):
        assert nbytes / (v100_rate * GROUPED_TRIAD_SHARE[pass_].value) == pytest.approx(expected_s, rel=1e-3)
        assert cm.compute_time_s("conv2d", pass_, depthwise, "float32") == pytest.approx(
            KERNEL_LAUNCH.value + expected_s, rel=1e-3)
    dense = cm.coefficients.compute["conv2d/bwd_data/float16"]
    assert dense.memory_bandwidth_bytes_per_s == pytest.approx(814e9)
    assert "scaled by SMs x clock" in " ".join(cm.coefficients.compute["conv2d_grouped/fwd/float16"].sources)


def test_a_measured_product_within_the_launch_floor_is_refused():
    """1 MFLOP at 1 TFLOP/s takes 1 us, inside the 3 us floor every call pays: not a kernel's own time."""
    from calibrate.published import net_rate
    from profiler.errors import UserError
    with pytest.raises(UserError, match="launch floor"):
        net_rate(1e6, 1e12)
    assert net_rate(6e6, 1e12) == pytest.approx(6e6 / 3e-6)  # 6 us measured, 3 us of it the floor


def test_grouped_convolutions_move_their_bytes_at_the_v100s_rate_per_sm_and_clock():
    """The depthwise shares were measured on a V100S (80 SMs at 1597 MHz, triad 1025.6 GB/s): forward 0.33 of it. An
    A100 (108 SMs at 1410 MHz) runs them at 0.33 x 1025.6 GB/s x 108 x 1410 / (80 x 1597), 1.19 times the V100S's
    rate, not at 0.33 of its own 1.36 TB/s triad; a V100 (80 at 1530) a little slower than the V100S."""
    from calibrate.published import GPUS, grouped_bytes_per_s
    a100, v100 = GPUS["A100-SXM4-40GB"], GPUS["V100-SXM2-16GB"]
    assert grouped_bytes_per_s(a100, 0.33) == pytest.approx(0.33 * 1025.6e9 * 108 * 1410 / (80 * 1597), rel=1e-9)
    assert grouped_bytes_per_s(v100, 0.33) == pytest.approx(0.33 * 1025.6e9 * 1530 / 1597, rel=1e-9)
    cm = datasheet("a100-dgx-8gpu.published.yaml")
    depthwise = dict(N=64, C=96, F=96, H=56, W=56, kernel=3, stride=1, padding=1, groups=96)
    fit = cm.coefficients.compute["conv2d_grouped/fwd/float16"]
    assert fit.memory_bandwidth_bytes_per_s == pytest.approx(grouped_bytes_per_s(a100, 0.33))
    assert cm.compute_time_s("conv2d", "fwd", depthwise, "float16") > 0


def test_a_measured_all_reduce_sweep_sets_the_nodes_intra_node_all_reduce(tmp_path, monkeypatch):
    """vTrain's cluster (a100-40gb-4hdr-8gpu) carries its own nccl-tests sweep: 8 GPUs all-reduce 2 MiB in the measured
    93.0 us (not the link model's ~49 us), 1.5 MiB on the line between 1 and 2 MiB, and no bytes at the node's ring
    latency; groups and nodes the sweep lacks keep the link model; a malformed sweep line is a one-line error."""
    from calibrate import published
    from profiler.errors import UserError

    node = next(n for n in NODES if n.file == "a100-40gb-4hdr-8gpu.published.yaml")
    cm = load_cost_model(build_profile(node, None))
    sweep = published.read_sweep(node.allreduce_sweep)
    (s1, t1), (s2, t2) = sweep[8][0], sweep[8][1]
    assert (s1, s2) == (2 ** 20, 2 ** 21) and t2 == pytest.approx(93.0e-6, rel=0.01)
    assert cm.collective_time_s("allreduce", s2, 8) == pytest.approx(t2, rel=1e-9)
    assert cm.collective_time_s("allreduce", 1.5 * 2 ** 20, 8) == pytest.approx((t1 + t2) / 2, rel=1e-9)
    ring = node.base_latency_s.value + 14 * node.step_latency_s.value
    assert cm.collective_time_s("allreduce", 1e-9, 8) == pytest.approx(ring, rel=1e-6)
    assert cm.collective_source("allreduce", 8) == "measured"
    assert cm.collective_source("allreduce", 16, 2) == "extrapolated"  # across nodes: the link model
    other = load_cost_model(build_profile(next(n for n in NODES if n.file == "a100-dgx-8gpu.published.yaml"), None))
    assert other.collective_source("allreduce", 8) == "extrapolated"  # a node without a sweep
    bad = tmp_path / "bad.csv"
    bad.write_text("group_size,size_bytes,time_s\n8,1048576,fast\n", encoding="utf-8")
    monkeypatch.setattr(published, "DATA_DIR", tmp_path)
    with pytest.raises(UserError) as err:
        published.read_sweep("bad.csv")
    assert "line 2" in str(err.value) and "bad.csv" in str(err.value) and "\n" not in str(err.value)


def test_a_node_with_half_the_rails_has_half_the_inter_node_bandwidth():
    """HPE's XL675d (MLPerf v2.1): a DGX A100 80 GB's GPUs and NVSwitch with 4 of its 8 HDR rails. Across nodes its
    all-reduce bandwidth term is twice the DGX's (96 against 192 GB/s of bus bandwidth); inside a node the two are
    the same; its GPU and memory are the 80 GB part's."""
    half, full = datasheet("a100-80gb-4hdr-8gpu.published.yaml"), datasheet("a100-80gb-dgx-8gpu.published.yaml")
    size = 1e9

    def bandwidth_s(cm, n, nodes):
        return cm.collective_time_s("allreduce", size, n, nodes) - cm.collective_time_s("allreduce", 1.0, n, nodes)
    assert bandwidth_s(half, 8, 1) == pytest.approx(bandwidth_s(full, 8, 1), rel=1e-9)
    assert bandwidth_s(half, 32, 4) > 1.5 * bandwidth_s(full, 32, 4)
    assert half.coefficients.links["allreduce"]["inter"].bus_bandwidth_bytes_per_s.value == 96.0e9
    assert load_profile(PROFILES / "a100-80gb-4hdr-8gpu.published.yaml").machine.gpus[0].memory_bytes \
        == load_profile(PROFILES / "a100-80gb-dgx-8gpu.published.yaml").machine.gpus[0].memory_bytes


def test_juwels_booster_has_twice_the_rails_of_the_two_rail_a100_node():
    """JUWELS Booster (JSC: 4 x A100 40 GB on NVLink3, 4 x HDR200): the 4-GPU SXM node with four rails where
    a100-sxm-4gpu-2hdr has two; the same inside a node, twice the inter-node bus bandwidth, its 48 cores and 512 GB."""
    four, two = datasheet("a100-sxm-4gpu-4hdr.published.yaml"), datasheet("a100-sxm-4gpu-2hdr.published.yaml")

    def bandwidth_s(cm, n, nodes):
        return cm.collective_time_s("allreduce", 1e9, n, nodes) - cm.collective_time_s("allreduce", 1.0, n, nodes)
    assert bandwidth_s(four, 4, 1) == pytest.approx(bandwidth_s(two, 4, 1), rel=1e-9)
    assert bandwidth_s(four, 32, 8) < 0.7 * bandwidth_s(two, 32, 8)
    assert four.coefficients.links["allreduce"]["inter"].bus_bandwidth_bytes_per_s.value == 96.0e9
    machine = load_profile(PROFILES / "a100-sxm-4gpu-4hdr.published.yaml").machine
    assert (machine.cpu_cores, machine.memory_bytes, machine.gpus_per_node) == (48, 512e9, 4)


def test_perlmutter_went_from_two_100_gbps_rails_to_four_200_gbps_ones():
    """Perlmutter's GPU nodes (NERSC): two Slingshot 10 NICs at 100 Gb/s in 2021, four Slingshot 11 at 200 Gb/s
    since; the same four NVLink-joined A100s, one 64-core EPYC and 256 GB."""
    old, new = datasheet("a100-sxm-4gpu-2ss10.published.yaml"), datasheet("a100-sxm-4gpu-4ss11.published.yaml")

    def bandwidth_s(cm, n, nodes):
        return cm.collective_time_s("allreduce", 1e9, n, nodes) - cm.collective_time_s("allreduce", 1.0, n, nodes)
    assert bandwidth_s(old, 4, 1) == pytest.approx(bandwidth_s(new, 4, 1), rel=1e-9)
    assert bandwidth_s(old, 64, 16) > 3 * bandwidth_s(new, 64, 16)
    links = [cm.coefficients.links["allreduce"]["inter"].bus_bandwidth_bytes_per_s.value for cm in (old, new)]
    assert links == [24.0e9, 96.0e9]
    for name in ("a100-sxm-4gpu-2ss10", "a100-sxm-4gpu-4ss11"):
        machine = load_profile(PROFILES / f"{name}.published.yaml").machine
        assert (machine.cpu_cores, machine.memory_bytes, machine.gpus_per_node) == (64, 256e9, 4)
