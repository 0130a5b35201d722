"""Out-of-core planner: hand-computed toy plans, the closed-form iteration time, DP vs exhaustive."""
import random

import pytest

from predictor.blocks import Block
from predictor.outofcore import KEEP, RECOMPUTE, SWAP, Link, data_parallel_iteration, evaluate, plan

LINK = Link(latency_s=0.0, bandwidth_bytes_per_s=1.0)  # 1 byte per second: transfer time = bytes


def toy():
    """b0's transfers (4 s each way) hide behind b1 (fwd 4, bwd 8); b1's and b2's do not (they would
    expose 3 + 2 = 5 s against a 4 s / 1 s recompute); b3 is last, nothing hides its swap."""
    return [
        Block("b0", fwd_s=1, bwd_s=2, activation_bytes=4, input_bytes=1),
        Block("b1", fwd_s=4, bwd_s=8, activation_bytes=4, input_bytes=1),
        Block("b2", fwd_s=1, bwd_s=2, activation_bytes=4, input_bytes=1),
        Block("b3", fwd_s=1, bwd_s=2, activation_bytes=2, input_bytes=1),
    ]


COMPUTE_S = (1 + 2) + (4 + 8) + (1 + 2) + (1 + 2)  # 21


def test_unlimited_cap_keeps_everything_in_the_dynamic_programme_too():
    p = plan(toy() * 3, cap_bytes=1e6, d2h_s=LINK.time_s, h2d_s=LINK.time_s, exhaustive_max_blocks=0)
    assert p.choices == (KEEP,) * 12  # b0's swap would be free too; nothing is moved that need not be


def test_unlimited_cap_keeps_everything():
    p = plan(toy(), cap_bytes=1e18, d2h_s=LINK.time_s, h2d_s=LINK.time_s)
    assert p.choices == (KEEP,) * 4
    assert p.iteration_s == pytest.approx(COMPUTE_S)
    assert p.peak_bytes == pytest.approx(14)


def test_cap_below_activation_total_swaps_where_hidden_and_recomputes_elsewhere():
    # cap 9 < 14: swap b0 (its transfers hide behind b1: 0 s), keep b1, recompute b2 (1 s, where a swap
    # would expose 3 + 2 s), keep b3. Peak, following the blocks: b1 in use while b0 arrives 0 + 4 + 4 = 8;
    # b2 rematerialised next to b1 and its input 4 + 1 + 4 = 9; b3 kept 5 + 2 = 7
    p = plan(toy(), cap_bytes=9, d2h_s=LINK.time_s, h2d_s=LINK.time_s)
    assert p.choices == (SWAP, KEEP, RECOMPUTE, KEEP)
    assert p.exposed_transfer_s == 0
    assert p.recompute_s == pytest.approx(1)
    assert p.iteration_s == pytest.approx(COMPUTE_S + 1)  # T = sum(FW+BW) + FW_2 = 22
    assert p.peak_bytes == pytest.approx(9)
    assert p.swapped_bytes == 4


@pytest.mark.parametrize("cap, choices, closed_form_s, peak", [
    # 12: swapping b0 alone is free (hidden) and brings the peak to 10 (the end of the forward pass)
    (12, (SWAP, KEEP, KEEP, KEEP), COMPUTE_S, 4 + 4 + 2),
    # 7: b0, b1, b2 recomputed (b1's swap would expose 5 s > its 4 s forward); peak while b2 is
    # rematerialised: inputs 1 + 1 + 1 + its 4 activations = 7
    (7, (RECOMPUTE, RECOMPUTE, RECOMPUTE, KEEP), COMPUTE_S + 1 + 4 + 1, 7),
])
def test_tighter_caps_trade_time_for_memory(cap, choices, closed_form_s, peak):
    p = plan(toy(), cap_bytes=cap, d2h_s=LINK.time_s, h2d_s=LINK.time_s)
    assert p.choices == choices
    assert p.iteration_s == pytest.approx(closed_form_s)
    assert p.peak_bytes == pytest.approx(peak)


def test_static_bytes_count_against_the_cap():
    p = plan(toy(), cap_bytes=109, d2h_s=LINK.time_s, h2d_s=LINK.time_s, static_bytes=100)
    assert p.choices == (SWAP, KEEP, RECOMPUTE, KEEP) and p.peak_bytes == pytest.approx(109)


def test_nothing_fits_returns_none():
    assert plan(toy(), cap_bytes=6.9, d2h_s=LINK.time_s, h2d_s=LINK.time_s) is None


def test_latency_makes_a_hidden_swap_exposed():
    slow = Link(latency_s=1.0, bandwidth_bytes_per_s=1.0)  # b0 now takes 5 s: 1 s exposed each way
    p = evaluate(toy(), (SWAP, KEEP, KEEP, KEEP), slow.time_s, slow.time_s)
    assert p.exposed_transfer_s == pytest.approx(1 + 0)  # out: 5-4; in: 5-8 -> 0


def test_evaluate_rejects_unknown_choice():
    with pytest.raises(ValueError):
        evaluate(toy(), ("keep", "keep", "keep", "spill"), LINK.time_s, LINK.time_s)


def random_blocks(rng, n):
    return [Block(f"b{i}", fwd_s=rng.randint(1, 6), bwd_s=rng.randint(2, 12), activation_bytes=rng.randint(1, 9),
                  input_bytes=rng.randint(0, 3)) for i in range(n)]


def test_dynamic_programme_matches_exhaustive_search():
    rng = random.Random(7)
    for _ in range(25):
        blocks = random_blocks(rng, rng.randint(2, 7))
        cap = rng.randint(4, 40)
        exact = plan(blocks, cap, LINK.time_s, LINK.time_s)
        # integer sizes with a resolution equal to the budget: one unit per byte, no rounding
        for resolution in (cap, 4 * cap):
            dp = plan(blocks, cap, LINK.time_s, LINK.time_s, resolution=resolution, exhaustive_max_blocks=0)
            assert (dp is None) == (exact is None)
            if exact is not None:
                assert dp.iteration_s == pytest.approx(exact.iteration_s)
                assert dp.peak_bytes <= cap
        # rounding up: fits, never faster
        coarse = plan(blocks, cap, LINK.time_s, LINK.time_s, resolution=3, exhaustive_max_blocks=0)
        if coarse is not None:
            assert coarse.peak_bytes <= cap and coarse.iteration_s >= exact.iteration_s - 1e-9


def test_data_parallel_pipeline_closed_form():
    # two blocks, all kept: forward 1+1, backward of b1 ends at 2+2=4, of b0 at 6.
    # per block: allreduce 1 s, gradient copy 0.5 s, host update 1 s, weights back 0.5 s
    blocks = [Block("b0", fwd_s=1, bwd_s=2, activation_bytes=1, weight_bytes=8),
              Block("b1", fwd_s=1, bwd_s=2, activation_bytes=1, weight_bytes=8)]
    single = evaluate(blocks, (KEEP, KEEP), LINK.time_s, LINK.time_s)
    dp = data_parallel_iteration(single, blocks, allreduce_s=lambda w: 1.0, d2h_s=lambda w: 0.5,
                                 h2d_s=lambda w: 0.5, host_update_s=lambda w: w / 8)  # 1 s per block
    # b1: ar 4->5, d2h 5.5, update 6.5, h2d 7.0 ; b0: ar max(6,5)+1=7, d2h 7.5, update 8.5, h2d 9.0
    # next forward: max(d_0=6, h_0 - 0 = 9.0, h_1 - FW_0 = 7.0 - 1) = 9.0
    assert dp.backward_end_s == pytest.approx(6.0)
    assert dp.iteration_s == pytest.approx(9.0)
    assert dp.exposed_update_s == pytest.approx(3.0)


def test_graph_blocks_group_at_weighted_layers_with_their_inputs_and_saved_tensors():
    from predictor.block_costs import boundary_bytes_per_sample, graph_blocks, weight_layer_groups
    from predictor.layercost import LayerCoster
    from tests.outofcore_toys import FlatCostModel, residual_graph

    graph = residual_graph()
    assert weight_layer_groups(graph) == [(0, 2), (2, 5), (5, 6)]
    blocks = graph_blocks(graph, LayerCoster(graph, FlatCostModel(call_s=1e-3), "fp32"), samples=2)
    # per sample: conv1 saves the model input (32 elems), relu1 its output (32, also conv2's input);
    # conv2's block (conv2, add, flatten) saves nothing new; fc saves its input (add's output, 32)
    assert [b.activation_bytes for b in blocks] == [2 * 4 * 64, 0, 2 * 4 * 32]
    # block 1 reads relu1 and the model input from outside: 2 x 32 elems per sample
    assert [b.input_bytes for b in blocks] == [2 * 4 * 32, 2 * 4 * 64, 2 * 4 * 32]
    assert [b.weight_bytes for b in blocks] == [4 * 36, 4 * 36, 4 * 330]
    # every kernel call costs 1 ms x 2 samples; conv1 reads the model input so it has no data gradient:
    # fwd conv1 + relu1, bwd conv1 weight + relu1 data
    assert blocks[0].fwd_s == pytest.approx(2 * 2e-3) and blocks[0].bwd_s == pytest.approx(2 * 2e-3)
    # the residual input crosses every boundary up to the add (layer 3); after it only add's output
    assert boundary_bytes_per_sample(graph, [0, 2, 5], act_bytes=4) == [0.0, 4 * 64, 4 * 32]


def _predict(strategy, cap, cost=None, batch=8, devices=1, **plan_fields):
    from predictor.api import predict
    from predictor.plan import Plan
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph
    plan = Plan(strategy, batch=batch, devices=devices, devices_per_node=devices, p_data=devices, **plan_fields)
    return predict(conv_chain_graph(), plan, cost or FlatCostModel(call_s=1e-3), interval=False,
                   device_memory_bytes=cap)


def test_outofcore_strategy_fits_where_serial_does_not_with_hidden_swaps():
    serial = _predict("serial", 0.6e6)
    assert serial.feasible and not serial.fits  # 0.64 MB needed
    ooc = _predict("outofcore", 0.6e6, extra=(("optimizer_on", "device"),))
    assert ooc.fits and ooc.memory_bytes <= 0.6e6
    assert "swap" in ooc.details["block_choices"].values()
    # 4 conv blocks of 131 kB at 1 GB/s (131 us) hide behind 16-32 ms of compute: nothing is exposed,
    # so the iteration is the serial one (same compute, same update after backward)
    assert ooc.swap_s == 0 and ooc.recompute_s == 0
    assert ooc.iteration_s == pytest.approx(serial.iteration_s)


def test_outofcore_keeps_optimizer_state_on_the_host():
    everything = _predict("outofcore", 1e9, optimizer="adam", extra=(("optimizer_on", "device"),))
    assert not everything.feasible and "plain data parallelism" in everything.reason
    host = _predict("outofcore", 1e9, optimizer="adam")
    params = host.details["params_per_device"]
    assert host.fits and host.optimizer_bytes == 0
    assert host.details["host_optimizer_bytes"] == pytest.approx(params * 4 * 2)  # Adam: 2 fp32 words


def test_outofcore_infeasible_reasons_name_the_problem():
    from tests.outofcore_toys import FlatCostModel
    tiny = _predict("outofcore", 0.3e6, extra=(("optimizer_on", "device"),))
    assert not tiny.feasible and "even swapping every block" in tiny.reason
    no_host = _predict("outofcore", 1e9, cost=FlatCostModel(host_memory=False))
    assert not no_host.feasible and "host/triad" in no_host.reason


def test_search_offers_outofcore_and_cooperative_and_says_which_wins():
    from predictor.outofcore_strategies import swap_vs_model_parallel
    from predictor.search import search
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph
    result = search(conv_chain_graph(), FlatCostModel(call_s=1e-3), batch=8, max_devices=2, devices_per_node=2,
                     memory_cap_bytes=0.6e6, interval=False)
    assert {"outofcore", "cooperative", "serial+recompute"} <= set(result.best_by_strategy)
    assert "serial" not in result.best_by_strategy  # does not fit the cap
    verdict = swap_vs_model_parallel(result.best_by_strategy)
    swap = min((p for name, p in result.best_by_strategy.items() if name in ("outofcore", "serial+recompute",
                                                                              "data+recompute")),
               key=lambda p: p.iteration_s)
    split = min((p for p in result.best_by_strategy.values() if p.plan.inner > 1), key=lambda p: p.iteration_s)
    expected = "beats" if swap.iteration_s <= split.iteration_s else "loses to"
    assert verdict.startswith(f"out-of-core {swap.plan.strategy}") and f" {expected} model parallelism " \
        f"{split.plan.strategy}" in verdict


def test_offload_strategy_adds_every_copy_unoverlapped():
    serial = _predict("serial", 1e9)
    off = _predict("serial+offload", 1e9)
    # per sample 5 saved tensors of 8192 B (input + 4 ReLU outputs) x 8 samples, out and back at 1 GB/s
    assert off.swap_s == pytest.approx(2 * 5 * 8 * 8192 / 1e9)
    assert off.iteration_s == pytest.approx(serial.iteration_s + off.swap_s)
    assert off.activations_bytes == pytest.approx(8 * 8192)  # the largest layer's saved tensor


def test_host_updates_of_one_node_share_its_memory_bandwidth():
    # one replica per device, 2 devices per node: each host step streams twice the bytes' worth of time
    one = _predict("outofcore", 1e9, optimizer="adam", devices=1)
    two = _predict("outofcore", 1e9, optimizer="adam", devices=2, batch=16)
    # the first block (conv0, 576 params = 2304 B) finishes backward last and is needed first: its chain is
    # exposed: gradients out (2304 B at 1 GB/s) + Adam step (28 B/param, x replicas on the node) + weights back
    chain_s = lambda replicas: 2304e-9 + replicas * 576 * 28e-9 + 2304e-9  # noqa: E731
    assert one.update_s == pytest.approx(chain_s(1))
    assert two.update_s == pytest.approx(chain_s(2))


def test_breakdown_line_names_the_planner_choices():
    from predictor.outofcore_strategies import breakdown
    line = breakdown(_predict("outofcore", 0.6e6, extra=(("optimizer_on", "device"),)))
    assert line.startswith("outofcore (1 device; blocks: 4 keep, 1 swap; optimizer on the device)")
    assert line.endswith("recompute 0 s, exposed swap 0 s")  # both swaps hide behind compute
    assert breakdown(_predict("serial", 1e9)) is None


def test_a_cpu_profile_offers_no_offload_or_out_of_core():
    """On a CPU profile the device memory is the host's: moving activations or optimizer state "to the host"
    only adds copies, so those plans are refused with the reason (the main job used to recommend outofcore)."""
    from pathlib import Path

    from calibrate.cost_model import load_cost_model
    from predictor.api import load_model, predict_all

    cm = load_cost_model(Path(__file__).resolve().parents[1] / "data" / "drift_quick_cpu_profile.yaml")
    assert cm.device_is_host
    preds = predict_all(load_model("small_cnn2d"), 16, 1, cm, strategies=("serial", "serial+offload", "outofcore"),
                        devices_per_node=1, interval=False)
    by = {p.plan.strategy: p for p in preds}
    assert by["serial"].feasible
    for name in ("serial+offload", "outofcore"):
        assert not by[name].feasible and "CPU profile" in by[name].reason
