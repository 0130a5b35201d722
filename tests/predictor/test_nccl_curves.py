"""Published multi-node all-reduce curves (predictor.published.nccl) and the link model's fill term
(calibrate.cost_model.collective_time_s, calibrate.published.NCCL_NET_FILL)."""
import pytest

from calibrate.published import NCCL_NET_FILL
from predictor.api import load_cost_model
from predictor.published.nccl import Curve, fill_s, fills, load_curves, shape_accuracy
from profiler.errors import UserError

MIB = 2**20


def _curve(latency_s, bus_bytes_per_s, fill, ranks=16, sizes=(8, 1024, 2**28, 2**30, 2**32)):
    """A curve drawn from the model of the module docstring: t = a below 8 KiB, a + F + x/B above."""
    factor = 2 * (ranks - 1) / ranks
    points = tuple((float(s), latency_s if s <= 8192 else latency_s + fill + s * factor / bus_bytes_per_s)
                   for s in sizes)
    return Curve("synthetic", 2, ranks, "InfiniBand", points)


def test_fill_is_read_back_from_a_curve_drawn_with_it():
    assert fill_s(_curve(40e-6, 190e9, 0.3e-3)) == pytest.approx(0.3e-3, rel=1e-6)
    assert fill_s(_curve(150e-6, 80e9, 0.9e-3, ranks=32)) == pytest.approx(0.9e-3, rel=1e-6)


def test_the_link_model_reproduces_a_curve_of_its_own_shape():
    """Mid-size points on a + x/B + min(x/B, F): the fill model is exact there, the alpha-beta line is not."""
    a, bus, fill, ranks = 40e-6, 190e9, 0.3e-3, 16
    factor = 2 * (ranks - 1) / ranks
    sizes = [8, 1024] + [2**k for k in range(16, 33)]
    points = tuple((float(s), a if s <= 8192 else a + s * factor / bus + min(s * factor / bus, fill)) for s in sizes)
    plain, with_fill, n = shape_accuracy(Curve("shape", 2, ranks, "InfiniBand", points))
    assert n == 17 and with_fill == pytest.approx(1.0, abs=1e-9) and plain < 0.9


def test_a_curve_without_latency_or_large_sizes_has_no_fill():
    assert fill_s(_curve(40e-6, 190e9, 0.3e-3, sizes=(2**28, 2**30))) is None  # no size <= 8 KiB
    assert fill_s(_curve(40e-6, 190e9, 0.3e-3, sizes=(8, 2**30))) is None  # one large size: no line
    assert fill_s(Curve("same size", 4, 32, "EFA", ((8.0, 1e-4), (2.0**32, 0.02), (2.0**32, 0.021)))) is None


def test_shipped_curves_give_the_profiles_fill_and_its_interval():
    """NCCL_NET_FILL is the InfiniBand curve's F; its interval spans every curve F can be read from."""
    curves = load_curves()
    by_id = fills(curves)
    ib = [by_id[c.id] for c in curves if c.infiniband and c.id in by_id]
    assert ib and NCCL_NET_FILL.value == pytest.approx(sorted(ib)[len(ib) // 2], rel=1e-3)
    assert NCCL_NET_FILL.low == pytest.approx(min(by_id.values()), rel=1e-3)
    assert NCCL_NET_FILL.high == pytest.approx(max(by_id.values()), rel=1e-3)
    assert len(by_id) >= 4 and all(1e-4 < f < 2e-3 for f in by_id.values())


def test_fill_by_hand_on_a_reference_profile():
    """DGX-1 with one EDR rail (12.2 GB/s inter-node bus bandwidth), 16 ranks on 2 nodes, ring latency
    5.6 us + 28 x 1.98 us + 2 x 14 us (the tree's 2 x 7 x 1.98 + 2 x 14 us is faster): below the fill the bandwidth
    time counts twice, above it once plus the fill; one node has no fill."""
    cm, _ = load_cost_model("v100-dgx1-1edr-8gpu.published")
    alpha = 5.6e-6 + min(28 * 1.98e-6, 14 * 1.98e-6) + 2 * 14e-6
    for size in (1 * MIB, 64 * MIB):
        bandwidth_s = size * 2 * 15 / 16 / 12.2e9
        expected = alpha + bandwidth_s + min(bandwidth_s, NCCL_NET_FILL.value)
        assert cm.collective_time_s("allreduce", size, 16, 2) == pytest.approx(expected, rel=1e-9)
    intra = cm.coefficients.links["allreduce"]["intra"].bus_bandwidth_bytes_per_s.value
    assert cm.collective_time_s("allreduce", 64 * MIB, 8, 1) == pytest.approx(
        5.6e-6 + 14 * 1.98e-6 + 64 * MIB * 2 * 7 / 8 / intra, rel=1e-9)
    # point to point crosses nodes without a ring: no fill
    p2p = cm.collective_time_s("sendrecv", 64 * MIB, 2, 2)
    link = cm.coefficients.links["sendrecv"]["inter"]
    assert link.fill_latency_s is None
    assert p2p == pytest.approx(5.6e-6 + 14e-6 + 64 * MIB / link.bus_bandwidth_bytes_per_s.value, rel=1e-9)


def test_profile_summary_shows_the_fill():
    from calibrate.report import fit_lines
    from calibrate.shipped import shipped_profiles_dir
    from profiler.profile import load_profile

    lines = fit_lines(load_profile(shipped_profiles_dir() / "v100-dgx1-1edr-8gpu.published.yaml"))
    assert any(l.startswith("link allreduce inter") and "bandwidth-regime fill 302 us" in l for l in lines)
    assert not any(l.startswith("link allreduce intra") and "fill" in l for l in lines)


def test_a_malformed_curve_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "curves.yaml"
    bad.write_text("id: not a list\n")
    with pytest.raises(UserError, match="must be a list"):
        load_curves(bad)
    bad.write_text("- id: x\n  data: []\n")
    with pytest.raises(UserError, match="record 0: needs a `system`"):
        load_curves(bad)
