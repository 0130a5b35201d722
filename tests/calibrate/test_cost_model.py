"""The CostModel over fitted coefficients: measured vs extrapolated collectives, bounds, missing coefficients."""
import numpy as np
import pytest

from calibrate.cost_api import CostModel
from calibrate.cost_model import load_cost_model
from calibrate.fit import fit_profile
from calibrate.report import fit_lines, fit_warnings
from calibrate.synthetic import collective_samples, conv_samples, hockney, profile_with, stream_samples
from profiler.errors import UserError
from profiler.profile import save_profile

SIZES = [2.0**k for k in range(4, 25)]
STEP_S, BASE_S, BUS_BW = 8e-6, 4e-6, 5e9


def ring_alpha(p):  # alpha(p) = base + step * 2(p-1) for all-reduce
    return BASE_S + STEP_S * 2 * (p - 1)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    samples = []
    for p in (2, 4):
        samples += collective_samples("allreduce", p, SIZES, hockney(ring_alpha(p), BUS_BW, "allreduce", p), rng)
    samples += collective_samples("sendrecv", 2, SIZES, hockney(15e-6, 3e9, "sendrecv", 2), rng)
    samples += stream_samples([2.0**k for k in range(14, 28)], lambda s: 1e-6 + s / 20e9, rng)
    convs = [dict(N=n, C=c, F=32, H=h, W=h, kernel=3, stride=1, padding=1) for n in (1, 2, 4) for c in (8, 32, 64)
             for h in (14, 28)]
    samples += conv_samples(convs, lambda fl, b: 10e-6 + fl / 50e9, rng)
    return fit_profile(profile_with(samples))


def test_implements_the_protocol(fitted):
    cm = load_cost_model(fitted)
    assert isinstance(cm, CostModel)
    assert cm.provenance == "calibrated" and cm.device_memory_bytes == 64e9


def test_measured_group_uses_its_own_fit(fitted):
    cm = load_cost_model(fitted)
    assert cm.collective_source("allreduce", 4) == "measured"
    s = 1e6
    truth = ring_alpha(4) + s * 2 * 3 / 4 / BUS_BW
    assert cm.collective_time_s("allreduce", s, 4) == pytest.approx(truth, rel=0.05)


def test_unmeasured_group_size_follows_the_ring_formula(fitted):
    cm = load_cost_model(fitted)
    assert cm.collective_source("allreduce", 16) == "extrapolated"
    for s in (1e3, 1e6, 1e8):
        truth = ring_alpha(16) + s * 2 * 15 / 16 / BUS_BW
        assert cm.collective_time_s("allreduce", s, 16) == pytest.approx(truth, rel=0.05)
    assert cm.collective_time_s("allreduce", 1e6, 1) == 0.0


def test_point_to_point_has_its_own_line(fitted):
    cm = load_cost_model(fitted)
    assert cm.collective_time_s("sendrecv", 1e6, 2) == pytest.approx(15e-6 + 1e6 / 3e9, rel=0.05)
    assert cm.collective_time_s("sendrecv", 1e6, 8) == pytest.approx(15e-6 + 1e6 / 3e9, rel=0.05)


def test_bounds_bracket_the_fitted_values(fitted):
    cm = load_cost_model(fitted)
    lo, hi = cm.at_bound("low"), cm.at_bound("high")
    conv = dict(N=3, C=16, F=32, H=20, W=20, kernel=3, stride=1, padding=1)
    for f in (lambda m: m.collective_time_s("allreduce", 1e5, 4), lambda m: m.collective_time_s("allreduce", 1e7, 32),
              lambda m: m.memory_time_s(1e8), lambda m: m.compute_time_s("conv2d", "fwd", conv, "float32")):
        assert f(lo) <= f(cm) <= f(hi)
    assert lo.collective_time_s("allreduce", 1e7, 4) < hi.collective_time_s("allreduce", 1e7, 4)


def test_missing_coefficients_name_what_is_missing(fitted):
    cm = load_cost_model(fitted)
    with pytest.raises(UserError, match="no coefficient for conv3d bwd_weight float16"):
        cm.compute_time_s("conv3d", "bwd_weight", dict(N=1, C=1, F=1, D=4, H=4, W=4, kernel=3), "float16")
    with pytest.raises(UserError, match="no inter-node coefficient for allreduce"):
        cm.collective_time_s("allreduce", 1e6, 16, nodes=2)
    with pytest.raises(UserError, match="unknown collective"):
        cm.collective_time_s("allreduce_v2", 1e6, 4)


def test_cpu_profile_has_no_host_device_copies(fitted):
    cm = load_cost_model(fitted)
    assert cm.host_device_time_s(1e9) == 0.0
    assert cm.memory_time_s(1e9, where="device") == cm.memory_time_s(1e9, where="host")


def test_zero_cost_passes(fitted):
    cm = load_cost_model(fitted)
    assert cm.compute_time_s("relu", "bwd_weight", dict(N=1, C=1, H=1, W=1), "float32") == 0.0


def test_loads_from_a_file_and_reports(fitted, tmp_path):
    path = tmp_path / "p.yaml"
    save_profile(fitted, path)
    cm = load_cost_model(path)
    assert cm.collective_time_s("allreduce", 1e6, 2) > 0
    lines = fit_lines(fitted)
    assert any(l.startswith("collective allreduce p=4") and "median err" in l for l in lines)
    assert any(l.startswith("link allreduce intra") and "measured group sizes 2,4" in l for l in lines)
    assert fit_warnings(fitted) == []


def test_warns_on_a_bad_fit():
    rng = np.random.default_rng(9)
    wobbly = lambda s: (20e-6 + s / 1e9) * (1.6 if int(np.log2(s)) % 2 else 0.6)  # no line fits this
    profile = fit_profile(profile_with(collective_samples("allreduce", 2, SIZES, wobbly, rng)))
    warnings = fit_warnings(profile)
    assert len(warnings) == 1 and warnings[0].startswith("collective allreduce p=2 nodes=1: held-out median error")
    assert "(sampling noise alone: " in warnings[0]  # 3% per-call noise over 9 calls: about 1%, far below


def test_corrupt_coefficients_are_a_user_error(fitted):
    broken = fitted.model_copy(update={"coefficients": {**fitted.coefficients, "compute": {"gemm/fwd/float32": {"kind": "x"}}}})
    with pytest.raises(UserError, match="coefficients.compute"):
        load_cost_model(broken)
    empty = fitted.model_copy(update={"coefficients": {}})
    with pytest.raises(UserError, match="no coefficients"):
        load_cost_model(empty)


def test_inter_node_link_from_multi_node_groups():
    """Multi-node samples give the inter-node step latency; unmeasured (p, nodes) follow min(ring, tree)."""
    rng = np.random.default_rng(4)
    inter_step_s, inter_bw = 30e-6, 2e9

    def alpha(p, nodes):
        """NCCL runs the faster of ring and tree, so measured latencies follow min(ring, tree), as the model."""
        from calibrate.collective_model import latency_steps, tree_latency_steps
        steps = [latency_steps("allreduce", p, nodes), tree_latency_steps("allreduce", p, nodes)]
        return BASE_S + min(STEP_S * n_intra + inter_step_s * n_inter for n_intra, n_inter in steps)

    samples = []
    for p in (2, 4):
        samples += collective_samples("allreduce", p, SIZES, hockney(ring_alpha(p), BUS_BW, "allreduce", p), rng)
    for p, nodes in ((4, 2), (8, 4)):
        samples += collective_samples("allreduce", p, SIZES, hockney(alpha(p, nodes), inter_bw, "allreduce", p), rng,
                                      nodes=nodes)
    cm = load_cost_model(fit_profile(profile_with(samples)))
    link = cm.coefficients.links["allreduce"]["inter"]
    assert link.inter_step_latency_s.value == pytest.approx(inter_step_s, rel=0.10)
    assert link.bus_bandwidth_bytes_per_s.value == pytest.approx(inter_bw, rel=0.05)
    assert cm.collective_source("allreduce", 8, 2) == "extrapolated"
    bandwidth_s = 1e5 * 2 * 7 / 8 / inter_bw
    ring = BASE_S + STEP_S * 12 + inter_step_s * 2 + bandwidth_s  # 12 intra + 2 inter steps
    tree = BASE_S + STEP_S * 6 + inter_step_s * 2 + bandwidth_s  # 2(4-1) intra + 2 log2(2) inter steps
    assert tree < ring
    assert cm.collective_time_s("allreduce", 1e5, 8, 2) == pytest.approx(tree, rel=0.03)
    # at 256 nodes NCCL's tree latency (2 log2(nodes) inter-node steps) beats the ring's 2(nodes - 1)
    s, p, nodes = 1e3, 512, 256
    tree = BASE_S + STEP_S * 2 * 1 + inter_step_s * 2 * 8 + s * 2 * (p - 1) / p / inter_bw
    assert cm.collective_time_s("allreduce", s, p, nodes) == pytest.approx(tree, rel=0.10)
    # NCCL before 2.4 (or NCCL_ALGO=Ring) has the ring only: 2(p - 1) - 2(nodes - 1) intra and 2(nodes - 1) inter
    # steps; the tree alone is the tree
    cm.collective_algorithms = ("tree",)
    assert cm.collective_time_s("allreduce", s, p, nodes) == pytest.approx(tree, rel=0.10)
    cm.collective_algorithms = ("ring",)
    ring = (cm.collective_time_s("allreduce", 1e5, 8, 2) - bandwidth_s,
            cm.collective_time_s("allreduce", s, p, nodes) - s * 2 * (p - 1) / p / inter_bw)
    assert ring[0] == pytest.approx(BASE_S + STEP_S * 12 + inter_step_s * 2, rel=0.05)
    assert ring[1] == pytest.approx(BASE_S + STEP_S * (2 * 511 - 2 * 255) + inter_step_s * 2 * 255, rel=0.10)
    assert ring[1] > 10 * (tree - s * 2 * (p - 1) / p / inter_bw)
    assert cm.at_bound("high").collective_algorithms == ("ring",)  # it rides along the interval's copies


def test_gemm_backward_costs_as_the_transposed_forward_gemm():
    rng = np.random.default_rng(6)
    from calibrate.synthetic import noisy_times
    from profiler.profile import Sample
    shapes_ = [(m, n, k) for m in (64, 256, 1024) for n in (64, 512) for k in (128, 1024)]
    # a machine whose GEMM speed depends only on the inner dimension K, so the transposition matters
    time_s = lambda m, n, k: 2 * m * n * k / (1e9 * k / 128)
    samples = [Sample(benchmark="gemm", variant="fwd", device="cpu", threads=1, params=dict(M=m, N=n, K=k),
                      times_s=noisy_times(time_s(m, n, k), rng, 0.02, 5)) for m, n, k in shapes_]
    cm = load_cost_model(fit_profile(profile_with(samples)))
    m, n, k = 256, 64, 1024
    assert cm.compute_time_s("linear", "bwd_data", dict(M=m, N=n, K=k), "float32") == pytest.approx(
        cm.compute_time_s("gemm", "fwd", dict(M=m, N=k, K=n), "float32"))
    assert cm.compute_time_s("gemm", "bwd_weight", dict(M=m, N=n, K=k), "float32") == pytest.approx(
        cm.compute_time_s("gemm", "fwd", dict(M=k, N=n, K=m), "float32"))
    with pytest.raises(UserError, match="no coefficient for gemm bwd_data float16"):
        cm.compute_time_s("gemm", "bwd_data", dict(M=m, N=n, K=k), "float16")


def test_stream_regimes_cache_and_dram():
    rng = np.random.default_rng(8)
    truth = lambda s: 2e-6 + s / (50e9 if s < 1e6 else 10e9)  # cache-resident below 1 MB, DRAM above
    profile = fit_profile(profile_with(stream_samples([2.0**k for k in range(12, 30)], truth, rng)))
    cm = load_cost_model(profile)
    for s in (1e5, 3e8):
        assert cm.memory_time_s(s) == pytest.approx(truth(s), rel=0.05)
    line = next(l for l in fit_lines(profile) if l.startswith("memory host/triad"))
    assert "cache-resident from 0 B" in line and "DRAM from" in line


def test_gpu_profile_host_device_copies_and_device_memory():
    from calibrate.synthetic import noisy_times
    from profiler.profile import GPUInfo, Sample
    rng = np.random.default_rng(10)
    sizes = [2.0**k for k in range(10, 30)]
    samples = [Sample(benchmark="host_device", variant=v, device="cuda:0", threads=1, params={"size_bytes": int(s)},
                      times_s=noisy_times(10e-6 + s / bw, rng, 0.03, 9), bytes_moved=s)
               for v, bw in (("h2d_pinned", 25e9), ("d2h_pinned", 20e9)) for s in sizes]
    samples += stream_samples(sizes, lambda s: 3e-6 + s / 1.5e12, rng, device="cuda:0")
    profile = profile_with(samples)
    profile.machine.gpus = [GPUInfo(name="test GPU", memory_bytes=40e9)]
    cm = load_cost_model(fit_profile(profile))
    assert cm.device_memory_bytes == 40e9
    assert cm.host_device_time_s(1e8, "h2d") == pytest.approx(10e-6 + 1e8 / 25e9, rel=0.05)
    assert cm.host_device_time_s(1e8, "d2h") == pytest.approx(10e-6 + 1e8 / 20e9, rel=0.05)
    assert cm.memory_time_s(1e9) == pytest.approx(3e-6 + 1e9 / 1.5e12, rel=0.05)
    with pytest.raises(UserError, match="no coefficient for host_device h2d_pageable"):
        cm.host_device_time_s(1e8, "h2d", pinned=False)
    with pytest.raises(UserError, match="no coefficient for memory host/triad"):
        cm.memory_time_s(1e9, where="host")
