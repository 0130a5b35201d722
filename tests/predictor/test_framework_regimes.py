"""Framework regimes of the gradient exchange and fabric contention, checked by hand."""
import math

import pytest

from calibrate.fabric import contention, leaves_spanned
from predictor.overlap import FRAMEWORKS, launches, ready_times, regime, schedule

# three layers in forward order; backward runs the last layer first
GRADS = [40.0, 30.0, 30.0]      # bytes
BWD = [1.0, 2.0, 3.0]           # seconds per layer (forward order) -> ready after layer 3: 3, after 2: 5, after 1: 6
T = lambda size: size / 10.0    # an allreduce of `size` bytes takes size / 10 s


def test_ready_times_walk_backward():
    assert ready_times(BWD) == [3.0, 5.0, 6.0]


def test_ddp_buckets_launch_when_ready():
    """Buckets of >= 50 bytes in backward order: {30, 30} ready at 5 s, {40} at 6 s.
    end_1 = 5 + 6 = 11, end_2 = max(6, 11) + 4 = 15; backward ends at 6: exposed 9, hidden 10 - 9 = 1."""
    issued = launches(GRADS, ready_times(BWD), regime("ddp", 50.0))
    assert issued == [(5.0, 60.0), (6.0, 40.0)]
    assert schedule(issued, 6.0, T) == pytest.approx((9.0, 1.0))


def test_horovod_fuses_what_is_ready_at_each_cycle_tick():
    """Cycle 5 ms scaled up: with cycle 4 s, layer 3 (ready 3 s) goes at tick 4, layers 2 and 1 (ready 5 and 6 s)
    at tick 8 fused into one 70-byte allreduce (under the 64 MB threshold)."""
    reg = regime("horovod")._replace(cycle_s=4.0)
    issued = launches(GRADS, ready_times(BWD), reg)
    assert issued == [(4.0, 30.0), (8.0, 70.0)]
    # end_1 = 4 + 3 = 7, end_2 = max(8, 7) + 7 = 15: exposed 15 - 6 = 9, hidden 10 - 9 = 1
    assert schedule(issued, 6.0, T) == pytest.approx((9.0, 1.0))
    defaults = regime("horovod")
    assert defaults.fusion_bytes == 64e6 and defaults.cycle_s == 5e-3


def test_horovod_splits_at_the_fusion_threshold():
    reg = regime("horovod")._replace(cycle_s=10.0, fusion_bytes=50.0)
    assert launches(GRADS, ready_times(BWD), reg) == [(10.0, 30.0), (10.0, 30.0), (10.0, 40.0)]


def test_horovod_grouped_fuses_at_most_a_group():
    """DeepLearningExamples' MXNet runner: 16 groups, 0.1 ms cycle. With 2 groups (50 bytes each) and a 10 s cycle,
    everything is ready by the first tick, and fusion stops at a group: {30} (30 + 30 > 50), {30}, {40}."""
    defaults = regime("horovod-grouped")
    assert (defaults.groups, defaults.cycle_s, defaults.fusion_bytes) == (16, 1e-4, 64e6)
    reg = defaults._replace(cycle_s=10.0, groups=2)
    assert launches(GRADS, ready_times(BWD), reg) == [(10.0, 30.0), (10.0, 30.0), (10.0, 40.0)]
    # at the real 0.1 ms cycle every layer goes at its own ready time (a tick is never shared here)
    assert launches(GRADS, ready_times(BWD), defaults._replace(groups=2)) == [
        (pytest.approx(3.0), 30.0), (pytest.approx(5.0), 30.0), (pytest.approx(6.0), 40.0)]


def test_no_overlap_is_one_allreduce_after_backward():
    issued = launches(GRADS, ready_times(BWD), regime("no-overlap"))
    assert issued == [(6.0, 100.0)]
    assert schedule(issued, 6.0, T) == pytest.approx((10.0, 0.0))


def test_overlap_efficiency_moves_part_of_the_hidden_time_to_exposed():
    """eta = 0.75: a quarter of the 10 s hidden behind a long backward slows that backward down."""
    issued = [(0.0, 100.0)]
    assert schedule(issued, 20.0, T) == pytest.approx((0.0, 10.0))
    assert schedule(issued, 20.0, T, efficiency=0.75) == pytest.approx((2.5, 7.5))


def test_unknown_framework_is_refused():
    assert set(FRAMEWORKS) == {"ddp", "horovod", "horovod-grouped", "no-overlap"}
    with pytest.raises(ValueError, match="unknown framework"):
        regime("mpi")


@pytest.mark.parametrize("nodes, per_leaf, ratio, expected", [
    (1, 34, 3.0, 1.0),          # one node
    (34, 34, 3.0, 1.0),         # one leaf: full bisection
    (68, 34, 3.0, 1.5),         # two leaves: half the traffic leaves the leaf, 1:3 uplinks -> 1.5x
    (340, 34, 3.0, 2.7),        # ten leaves: 0.9 * 3
    (10_000, 34, 3.0, 3.0 * (1 - 1 / math.ceil(10_000 / 34))),
    (64, None, 3.0, 1.0),       # unknown leaf size: no contention modelled
    (68, 34, 1.0, 1.0),         # non-blocking fabric
])
def test_contention_by_hand(nodes, per_leaf, ratio, expected):
    assert contention(nodes, per_leaf, ratio) == pytest.approx(expected)


def test_leaves_spanned():
    assert [leaves_spanned(n, 34) for n in (1, 34, 35, 68, 69)] == [1, 1, 2, 2, 3]


def test_abci_profile_slows_inter_node_bandwidth_beyond_a_rack():
    """The ABCI reference profile (34 nodes per leaf, 1:3): a 1 GB allreduce over 64 nodes (2 leaves) pays
    1.5x the bandwidth term of one over 32 nodes (1 leaf) on a quiet fabric, 3x with other jobs holding half the
    uplinks (the typical load, docs/method.md §6); latency terms aside."""
    from calibrate.collective_model import bus_factor
    from calibrate.cost_model import load_cost_model
    from calibrate.shipped import shipped_profile

    cm = load_cost_model(shipped_profile("v100-abci-4gpu.published"))
    link = cm.coefficients.links["allreduce"]["inter"]
    size = 1e9
    bw_term = lambda p: size * bus_factor("allreduce", p) / link.bus_bandwidth_bytes_per_s.value
    for percentile, factor in ((5.0, 1.5), (50.0, 3.0)):  # quiet: no other job; typical: load 0.5
        cm.cluster_load = percentile
        t32, t64 = cm.collective_time_s("allreduce", size, 128, 32), cm.collective_time_s("allreduce", size, 256, 64)
        lat32, lat64 = t32 - bw_term(128), t64 - factor * bw_term(256)
        assert 0 < lat32 < 1e-3 and 0 < lat64 < 1e-3


def test_regime_changes_the_prediction_in_the_right_order():
    """A data-parallel ResNet-50 over 16 nodes of one EDR rail: no-overlap exposes the whole 16 ms allreduce,
    DDP buckets and Horovod cycles hide much of it behind a 0.1 s backward; a backward shorter than one Horovod
    cycle hides nothing."""
    from predictor.api import default_plans, load_cost_model, load_model, predict

    graph = load_model("resnet50")
    cm, _ = load_cost_model("v100-dgx1-1edr-8gpu.published")
    exposed = {}
    for fw in FRAMEWORKS:
        plan = default_plans(graph, "data", 128 * 64, 128, 8, "fp32", "sgd", framework=fw)[0]
        pred = predict(graph, plan, cm, interval=False)
        exposed[fw] = pred.comm_exposed_s["gradient"]
        assert pred.comm_exposed_s["gradient"] + pred.comm_hidden_s["gradient"] > 0
    # the profile's overlap efficiency (0.57) still charges 43% of the hidden time: no-overlap stays far worse;
    # Horovod's cycle-sized all-reduces each pay the network's bandwidth start-up (fill), DDP's 25 MB buckets fewer
    assert exposed["no-overlap"] > 1.25 * exposed["horovod"] > 1.25 * exposed["ddp"] > 0
    tiny = load_model("resnet50", image=64, width=16)
    quick = default_plans(tiny, "data", 128 * 16, 128, 8, "fp32", "sgd", framework="horovod")[0]
    pred = predict(tiny, quick, cm, interval=False)
    assert pred.comm_hidden_s["gradient"] == 0 and pred.comm_exposed_s["gradient"] > 5e-3 - pred.compute_bwd_s
