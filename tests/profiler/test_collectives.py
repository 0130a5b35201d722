"""Real 2-rank gloo runs on CPU through the CLI (`profiler calibrate --only collectives`): every operation
and size present, fault handling (a rank that dies or hangs), start-up errors, and torchrun."""
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from kernels.collectives import OPERATIONS
from profiler.comm.factors import busbw_factor
from profiler.comm.section import QUICK_CPU_SIZES_BYTES
from profiler.profile import load_profile

# spawns processes or ranks, or profiles real training steps: not in the fast inner loop (-m "not slow")
pytestmark = pytest.mark.slow

FAULT_BOUND_S = 60  # a dead or hung rank must end the run well under a minute after it fails


def calibrate(out, *flags, env_extra=None, launcher=None, timeout=300):
    """Run the CLI; returns (exit code, stderr, seconds, tag) where tag marks every process it started."""
    tag = uuid.uuid4().hex
    env = {**os.environ, "PARAORACLE_TEST_TAG": tag, **(env_extra or {})}
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(name, None) if name not in (env_extra or {}) else None
    command = (launcher or [sys.executable, "-m"]) + ["paraoracle.cli", "calibrate", "--device", "cpu", "--quick",
                                                     "--only", "collectives", "--out", str(out), *flags]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stderr, time.monotonic() - started, tag


def leftover_processes(tag):
    """Processes still alive that inherited this run's tag (spawned ranks that were not killed)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("PARAORACLE_TEST_TAG") == tag:
                found.append(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def median(sample):
    return statistics.median(sample.times_s)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("coll") / "profile.yaml"
    code, err, seconds, tag = calibrate(out, "--ranks", "2")
    assert code == 0, err
    return load_profile(out), seconds, tag


def expected_sizes(op, n=2):
    return {OPERATIONS[op].message_bytes(s, n, 4) for s in QUICK_CPU_SIZES_BYTES}


def test_every_operation_size_and_regime_is_present(quick_run):
    profile, _, _ = quick_run
    for op in OPERATIONS:
        for variant in ("latency", "throughput", "interleaved"):
            got = {s.params["size_bytes"] for s in profile.samples if s.benchmark == op and s.variant == variant}
            assert got == expected_sizes(op), (op, variant)
    settings = profile.settings["collectives"]
    assert settings["backend"] == "gloo" and settings["world_size"] == 2 and settings["launcher"] == "spawn"


def test_times_are_positive_and_grow_with_size(quick_run):
    profile, _, _ = quick_run
    for op in OPERATIONS:
        for variant in ("latency", "throughput", "interleaved"):
            by_size = {s.params["size_bytes"]: s for s in profile.samples if s.benchmark == op and s.variant == variant}
            assert all(t > 0 for s in by_size.values() for t in s.times_s)
            sizes = sorted(by_size)
            medians = [median(by_size[size]) for size in sizes]
            # plausible for loopback gloo: above a microsecond, below a second per op
            assert all(1e-6 < m < 1.0 for m in medians), (op, variant, medians)
            # size-monotone within noise (a 2-core machine; small sizes are flat, latency-bound, and gloo's
            # 64 KiB-1 MiB range jitters by tens of percent between repetitions, so the fastest repetition
            # is compared; after compute, a small op's median holds gloo's wake-up of 1-3 ms): 16x more bytes
            # from 1 MiB up costs more, and 16 MiB far more than the smallest
            compared = [s for s in sizes if s >= 2**20 and 16 * s in by_size]
            assert compared, (op, variant, sizes)
            for small in compared:
                assert min(by_size[16 * small].times_s) > min(by_size[small].times_s), (op, variant, small)
            assert min(by_size[sizes[-1]].times_s) > 2 * min(by_size[sizes[0]].times_s), (op, variant)


def test_samples_record_group_layout_and_bandwidths(quick_run):
    profile, _, _ = quick_run
    for s in profile.samples:
        group = s.params["group"]
        assert group["size"] == 2 and group["ranks"] == [0, 1] and group["nodes"] == 1 and group["kind"] == "intra"
        algbw = s.params["size_bytes"] / median(s)
        assert s.extra["algbw_bytes_per_s"] == pytest.approx(algbw)
        assert s.extra["busbw_bytes_per_s"] == pytest.approx(s.extra["algbw_bytes_per_s"] * busbw_factor(s.benchmark, 2))


def test_quick_run_leaves_no_rank_processes(quick_run):
    _, _, tag = quick_run
    assert leftover_processes(tag) == []


def test_a_rank_that_dies_ends_the_run_with_a_partial_profile(tmp_path):
    out = tmp_path / "p.yaml"
    code, err, seconds, tag = calibrate(out, "--ranks", "2", "--collectives", "allreduce,allgather",
                                        "--max-message-bytes", "65536",
                                        env_extra={"PARAORACLE_FAULT": "rank:1,op:allgather,size:1024"})
    assert code != 0 and seconds < FAULT_BOUND_S + 30
    message = err.strip().splitlines()[-1]
    assert "allgather at 1024 B" in message and "group of 2" in message and "rank 1 exited with code 3" in message
    partial = load_profile(str(out) + ".partial")
    assert {s.benchmark for s in partial.samples} == {"allreduce", "allgather"}
    assert max(s.params["size_bytes"] for s in partial.samples if s.benchmark == "allgather") < 1024
    assert not out.exists()
    assert leftover_processes(tag) == []


def test_a_rank_that_hangs_ends_the_run_after_the_timeout(tmp_path):
    out = tmp_path / "h.yaml"
    code, err, seconds, tag = calibrate(out, "--ranks", "2", "--collectives", "broadcast", "--max-message-bytes", "256",
                                        "--timeout-s", "4", env_extra={"PARAORACLE_FAULT": "rank:1,op:broadcast,size:64,mode:hang"})
    assert code != 0 and seconds < FAULT_BOUND_S
    assert "broadcast at 64 B" in err.strip().splitlines()[-1]
    # 4, 8, 16, 32 B in the latency and throughput regimes; the interleaved regime runs round-robin over all
    # sizes after them, so it never started
    partial = load_profile(str(out) + ".partial")
    assert sorted((s.variant, s.params["size_bytes"]) for s in partial.samples) == \
        sorted((v, size) for v in ("latency", "throughput") for size in (4, 8, 16, 32))
    assert leftover_processes(tag) == []


def test_master_port_in_use_is_a_one_line_error(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err, _, _ = calibrate(tmp_path / "x.yaml", "--ranks", "2", "--master-port", str(port))
    assert code == 2 and f"--master-port {port}: already in use" in err.strip().splitlines()[-1]


def test_unreachable_master_under_srun_is_a_one_line_error(tmp_path):
    with __import__("socket").socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_NODELIST": "localhost", "MASTER_ADDR": "127.0.0.1"}
    code, err, seconds, _ = calibrate(tmp_path / "x.yaml", "--master-port", str(port), "--timeout-s", "3", env_extra=env)
    assert code == 1 and seconds < 60
    assert f"cannot join the job at master 127.0.0.1:{port}" in err.strip().splitlines()[-1]


@pytest.mark.slow
def test_torchrun_launch(tmp_path):
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun is not installed next to this python")
    out = tmp_path / "t.yaml"
    code, err, _, tag = calibrate(out, "--collectives", "allreduce,halo", "--max-message-bytes", "4096",
                                  launcher=[torchrun, "--nproc-per-node", "2", "-m"])
    assert code == 0, err[-2000:]
    profile = load_profile(out)
    assert profile.settings["collectives"]["launcher"] == "torchrun"
    assert {(s.benchmark, s.params["size_bytes"]) for s in profile.samples} == \
        {(op, 4 * 2**i) for op in ("allreduce", "halo") for i in range(11)}
    assert leftover_processes(tag) == []


@pytest.mark.slow
def test_four_ranks_on_two_stand_in_nodes_measure_intra_inter_and_mixed_groups(tmp_path):
    out = tmp_path / "four.yaml"
    code, err, _, tag = calibrate(out, "--ranks", "4", "--collectives", "allreduce,sendrecv", "--max-message-bytes", "64",
                                  env_extra={"PARAORACLE_HOSTS": "a,a,b,b"})
    assert code == 0, err[-2000:]
    profile = load_profile(out)
    groups = {(s.benchmark, tuple(s.params["group"]["ranks"])): s.params["group"] for s in profile.samples}
    assert groups[("allreduce", (0, 1))]["kind"] == "intra"
    assert groups[("allreduce", (0, 2))]["kind"] == "inter" and groups[("allreduce", (0, 2))]["nodes"] == 2
    assert groups[("allreduce", (0, 1, 2, 3))]["kind"] == "mixed"
    assert {ranks for op, ranks in groups if op == "sendrecv"} == {(0, 1), (0, 2)}  # pairs only
    assert profile.settings["collectives"]["nodes"] == 2
    assert leftover_processes(tag) == []


@pytest.mark.gpu
def test_nccl_path_on_gpus(tmp_path):
    """The NCCL path: one rank per GPU (at most 4 here); a single GPU has no group, so it is skipped with a message."""
    import torch

    gpus = min(torch.cuda.device_count(), 4)
    out = tmp_path / "gpu.yaml"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")}
    done = subprocess.run([sys.executable, "-m", "paraoracle.cli", "calibrate", "--device", "cuda", "--quick", "--only",
                           "collectives", "--ranks", str(gpus), "--max-message-bytes", str(2**20), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    profile = load_profile(out)
    if gpus == 1:
        assert "collectives skipped: 1 rank" in done.stderr and profile.samples == []
        return
    assert profile.settings["collectives"]["backend"] == "nccl"
    assert {s.benchmark for s in profile.samples} == set(OPERATIONS)
    assert all(t > 0 for s in profile.samples for t in s.times_s)
