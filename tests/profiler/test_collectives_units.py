"""Pure parts of the collectives section: busbw factors, message rounding, group layout, launcher
environments, fault specs, port checks. No processes are started here."""
import argparse
import socket

import pytest

from kernels.collectives import OPERATIONS
from profiler.comm import launch, layout
from profiler.comm.factors import algbw_bytes_per_s, busbw_bytes_per_s, busbw_factor
from profiler.comm.faults import parse_fault, short_cause
from profiler.comm.section import QUICK_CPU_SIZES_BYTES, _sizes, add_arguments
from profiler.errors import UserError


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_busbw_factors_are_nccl_tests(n):
    assert busbw_factor("allreduce", n) == pytest.approx(2 * (n - 1) / n)
    for op in ("allgather", "reduce_scatter", "alltoall"):
        assert busbw_factor(op, n) == pytest.approx((n - 1) / n)
    for op in ("broadcast", "sendrecv", "halo"):
        assert busbw_factor(op, n) == 1.0


def test_algbw_and_busbw():
    # 1 GB in 10 ms: algbw 100 GB/s; allreduce on 8 ranks: busbw = 100 * 14/8 = 175 GB/s
    assert algbw_bytes_per_s(1e9, 0.01) == pytest.approx(1e11)
    assert busbw_bytes_per_s("allreduce", 1e9, 0.01, 8) == pytest.approx(1.75e11)
    with pytest.raises(KeyError):
        busbw_factor("gather", 2)


def test_message_sizes_follow_nccl_tests_conventions():
    # allgather/reduce_scatter/alltoall: S is n pieces of whole elements; others: whole elements
    assert OPERATIONS["allgather"].message_bytes(4, 2, 4) == 8
    assert OPERATIONS["allgather"].message_bytes(100, 4, 4) == 96
    assert OPERATIONS["alltoall"].message_bytes(1024, 4, 4) == 1024
    assert OPERATIONS["allreduce"].message_bytes(4, 8, 4) == 4
    assert OPERATIONS["sendrecv"].max_group_size == 2


def test_quick_cpu_sizes_are_the_sparse_set_and_a_given_maximum_doubles_from_4_bytes():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sizes = _sizes(parser.parse_args([]), "cpu", quick=True)
    assert sizes == QUICK_CPU_SIZES_BYTES and sizes[-1] == 16 * 2**20 and list(sizes) == sorted(set(sizes))
    # four sizes in gloo's latency-bound range (at most 16 KiB), 4x steps above it
    assert len([s for s in sizes if s <= 16384]) == 4 and all(b == 4 * a for a, b in zip(sizes[3:], sizes[4:]))
    full = _sizes(parser.parse_args([]), "cuda", quick=False)
    assert full[0] == 4 and full[-1] == 256 * 2**20 and all(b == 2 * a for a, b in zip(full, full[1:]))
    given = _sizes(parser.parse_args(["--max-message-bytes", "256"]), "cpu", quick=True)
    assert given == (4, 8, 16, 32, 64, 128, 256)


def test_groups_on_one_node_are_every_power_of_two_prefix():
    groups = layout.plan_groups(["a"] * 6)
    assert [g.ranks for g in groups] == [(0, 1), (0, 1, 2, 3)]
    assert all(g.kind == "intra" and g.nodes == 1 for g in groups)


def test_groups_on_two_nodes_separate_intra_and_inter():
    groups = {g.ranks: g for g in layout.plan_groups(["a", "a", "b", "b"])}
    assert groups[(0, 1)].kind == "intra"
    assert groups[(0, 2)].kind == "inter" and groups[(0, 2)].nodes == 2
    assert groups[(0, 1, 2, 3)].kind == "mixed" and groups[(0, 1, 2, 3)].describe()["hosts"] == ["a", "b"]
    assert all(0 in ranks for ranks in groups)  # rank 0 gathers every result


def test_torchrun_and_slurm_environments():
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "n1", "MASTER_PORT": "29400"}
    place = launch.job_place(None, None, env)
    assert (place.launcher, place.rank, place.world_size, place.local_rank, place.master_addr, place.master_port) == \
        ("torchrun", 3, 8, 1, "n1", 29400)
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODELIST": "gpu[07-08,11]",
           "SLURM_JOB_ID": "123456"}
    place = launch.job_place(None, None, env)
    assert (place.launcher, place.rank, place.world_size, place.master_addr, place.master_port) == \
        ("slurm", 5, 8, "gpu07", 20000 + 123456 % 20000)
    assert launch.job_place("10.0.0.1", 5000, env).master_port == 5000
    assert launch.launched_job({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None
    assert launch.first_slurm_host("a1,b2") == "a1"


def test_fault_spec_parsing():
    fault = parse_fault("rank:1,op:allgather,size:4096,mode:hang")
    assert (fault.rank, fault.op, fault.size_bytes, fault.mode) == (1, "allgather", 4096, "hang")
    assert parse_fault("") is None
    with pytest.raises(UserError, match="PARAORACLE_FAULT"):
        parse_fault("rank=1")


def test_gloo_error_text_is_trimmed_to_the_cause():
    err = RuntimeError("[/x/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:5: Connection reset by peer. "
                       "This is typically caused by a remote worker\nmore")
    assert short_cause(err) == "RuntimeError: Read error [127.0.0.1]:5: Connection reset by peer"


def test_port_in_use_and_foreign_address_are_one_line_errors():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match=f"--master-port {port}: already in use"):
            launch.check_local_port("127.0.0.1", port)
    with pytest.raises(UserError, match="not an address of this host"):
        launch.check_local_port("192.0.2.1", None)  # TEST-NET-1, never local
    with pytest.raises(UserError, match="cannot resolve"):
        launch.check_local_port("no-such-host.invalid", None)
    assert launch.check_local_port("127.0.0.1", None) > 0


def _args(*flags):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(flags))


def test_preflight_rejects_bad_flags_before_anything_starts(monkeypatch):
    from profiler.comm.section import preflight

    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError, match=r"--collectives allreduce,gather: unknown operation\(s\) gather"):
        preflight(_args("--collectives", "allreduce,gather"), "cpu", True)
    with pytest.raises(UserError, match="--backend nccl needs a cuda device"):
        preflight(_args("--backend", "nccl", "--ranks", "2"), "cpu", True)
    preflight(_args("--ranks", "2"), "cpu", True)  # fine: a free port exists
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match="--ranks 2: not allowed under torchrun"):
        preflight(_args("--ranks", "2"), "cpu", True)
