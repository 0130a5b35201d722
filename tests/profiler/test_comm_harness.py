"""The collectives harness on a one-rank gloo group: the interleaved regime's round-robin order, its
failure report, and the chunks and rounds that bound the buffers and the time a sweep takes."""
import dataclasses

import pytest
import torch.distributed as dist

from profiler.comm.harness import (ADAPTIVE_BLOCK, FULL, INTERLEAVE_S, MIN_SWEEP_ROUNDS, QUICK, SweepFailure,
                                   measure_interleaved, rel_sem, sweep_chunks, sweep_rounds)


@pytest.fixture()
def one_rank_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_sweep_chunks_by_hand():
    assert sweep_chunks([4, 8, 16], limit_bytes=100) == [[0, 1, 2]]
    assert sweep_chunks([40, 50, 20, 30], limit_bytes=100) == [[0, 1], [2, 3]]
    assert sweep_chunks([10, 200, 10], limit_bytes=100) == [[0], [1], [2]]  # an oversized size stands alone


def test_sweep_rounds_by_hand():
    budget = dataclasses.replace(QUICK, interleaved_iterations=120)
    assert budget.rounds("cpu") == 120 and budget.rounds("cuda:0") == budget.gpu_interleaved_iterations
    # cheap ops: a round is 3 x (1 ms + 3 x 0.1 ms) = 3.9 ms, so 15 s would allow 3846 rounds; the budget's 120
    assert sweep_rounds([1e-4] * 3, budget.rounds("cpu"), 15.0) == 120
    assert sweep_rounds([1e-4] * 3, budget.rounds("cuda:0"), 15.0) == budget.gpu_interleaved_iterations
    # one 256 MiB op of 0.2 s: a round costs 1 ms + 0.6 s, so 15 s allows 24 rounds
    assert sweep_rounds([0.2], budget.rounds("cpu"), 15.0) == int(15.0 / (INTERLEAVE_S + 0.6))
    # never fewer than the floor, even when one round alone overruns
    assert sweep_rounds([10.0], budget.rounds("cpu"), 15.0) == MIN_SWEEP_ROUNDS


def test_interleaved_runs_every_size_once_per_round_in_a_shuffled_order(one_rank_group):
    """Each round is a permutation of the calls, the same on every rank (seeded by the round), and a call's
    predecessor changes from round to round."""
    order = []
    calls = [lambda i=i: order.append(i) for i in range(3)]
    times = measure_interleaved(calls, one_rank_group, "cpu", rounds=4)
    rounds = [order[r * 3:(r + 1) * 3] for r in range(4)]
    assert all(sorted(r) == [0, 1, 2] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1
    again = []
    measure_interleaved([lambda i=i: again.append(i) for i in range(3)], one_rank_group, "cpu", rounds=4)
    assert again == order
    assert [len(t) for t in times] == [4, 4, 4]
    assert all(t > 0 for per_call in times for t in per_call)


def test_rel_sem_by_hand():
    assert rel_sem([1.0]) == float("inf")
    # mean 2, sample variance 4 / 3 (ddof 1) over 4 values: sqrt(4 / 3) / sqrt(4) / 2
    assert rel_sem([1.0, 1.0, 3.0, 3.0]) == pytest.approx((4 / 3) ** 0.5 / 2 / 2)


def test_an_adaptive_sweep_keeps_only_the_imprecise_sizes(one_rank_group, monkeypatch):
    """With a target, a size whose mean is already precise leaves after min_rounds; a noisy one runs every
    round; each round still runs the sizes left in a shuffled order."""
    from profiler.comm import harness

    steady = iter(lambda: 1e-3, None)
    noisy = iter([1e-3, 9e-3] * 1000)
    which = {"steady": steady, "noisy": noisy}
    current = []

    class FakeClock:  # the times a call reports, by the call's name (no real timing)
        def __init__(self, device):
            self.device = device

        def time(self, fn, calls):
            fn()
            return next(which[current[-1]])

    monkeypatch.setattr(harness, "_Clock", FakeClock)
    calls = [lambda: current.append("steady"), lambda: current.append("noisy")]
    times = measure_interleaved(calls, one_rank_group, "cpu", rounds=60, target_rel_sem=0.05, min_rounds=20)
    assert len(times[0]) == 20 and len(times[1]) == 60
    assert current[:40].count("steady") == 20 and current[40:] == ["noisy"] * 40
    # without a target every size gets every round, as a full calibration sweeps
    current.clear()
    times = measure_interleaved(calls, one_rank_group, "cpu", rounds=30)
    assert [len(t) for t in times] == [30, 30]
    assert FULL.target_rel_sem is None and QUICK.target_rel_sem is not None
    assert QUICK.min_rounds % ADAPTIVE_BLOCK == 0 and QUICK.min_rounds < QUICK.interleaved_iterations


def test_a_failing_call_names_its_index_with_the_cause(one_rank_group):
    def broken():
        raise RuntimeError("peer gone")

    with pytest.raises(SweepFailure) as failure:
        measure_interleaved([lambda: None, broken], one_rank_group, "cpu", rounds=2)
    assert failure.value.index == 1 and "peer gone" in str(failure.value.__cause__)


def test_a_sweep_failure_names_the_size_it_reached(one_rank_group, monkeypatch):
    """The worker turns SweepFailure(index) into a CommFailure naming that call's size, after the latency and
    throughput points of every size were reported."""
    from profiler.comm import faults, worker
    from profiler.comm.harness import QUICK
    from profiler.comm.layout import Group

    def failing_sweep(calls, group, device, rounds, **adaptive):
        try:
            raise RuntimeError("Connection closed by peer")
        except RuntimeError as err:
            raise SweepFailure(1) from err

    monkeypatch.setattr(worker, "measure_interleaved", failing_sweep)
    config = worker.CommConfig(device="cpu", backend="gloo", ops=("allreduce",), sizes_bytes=(4, 8, 16), quick=True,
                               timeout_s=5, startup_timeout_s=5, launcher="spawn", master_addr="127.0.0.1",
                               master_port=1, world_size=1)
    reports = []
    group = Group(ranks=(0,), hosts=("a",), kind="intra")
    with pytest.raises(faults.CommFailure) as failure:
        worker._measure_op("allreduce", [(4, 4), (8, 8), (16, 16)], group, one_rank_group, 0, "cpu", QUICK, None,
                           config, lambda kind, payload: reports.append((kind, payload)), lambda: None)
    assert "allreduce at 8 B" in str(failure.value) and "Connection closed by peer" in str(failure.value)
    measured = sorted((p["variant"], p["params"]["size_bytes"]) for kind, p in reports if kind == "sample")
    assert measured == sorted((v, s) for v in ("latency", "throughput") for s in (4, 8, 16))
