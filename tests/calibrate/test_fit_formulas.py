"""Closed forms behind the fits: work per call (calibrate.shapes) and collective steps/bus factors."""
import pytest

from calibrate import shapes
from calibrate.collective_model import bus_factor, latency_steps, tree_latency_steps
from profiler.errors import UserError


def test_gemm_work():
    w = shapes.work("gemm", "fwd", dict(M=64, N=32, K=16), "float16")
    assert w["flops"] == 2 * 64 * 32 * 16
    assert w["bytes"] == (64 * 16 + 16 * 32 + 64 * 32) * 2


def test_conv_work_same_for_every_pass():
    p = dict(N=2, C=3, F=8, H=10, W=10, kernel=3, stride=2, padding=1)  # out 5x5
    for pass_ in ("fwd", "bwd_data", "bwd_weight"):
        w = shapes.work("conv2d", pass_, p, "float32")
        assert w["flops"] == 2 * 2 * 8 * 3 * 9 * 25
        assert w["bytes"] == (2 * 3 * 100 + 8 * 3 * 9 + 2 * 8 * 25) * 4


def test_conv3d_and_per_dim_kernels():
    w = shapes.work("conv3d", "fwd", dict(N=1, C=2, F=4, D=8, H=8, W=8, kernel=[3, 3, 3], stride=1, padding=1), "float32")
    assert w["flops"] == 2 * 1 * 4 * 2 * 27 * 512


def test_memory_bound_bytes():
    p = dict(N=2, C=4, H=8, W=8)
    e = 2 * 4 * 64
    assert shapes.work("relu", "fwd", p, "float32")["bytes"] == 2 * e * 4
    assert shapes.work("relu", "bwd_data", p, "float32")["bytes"] == 3 * e * 4
    assert shapes.work("add", "fwd", p, "bfloat16")["bytes"] == 3 * e * 2
    pool = shapes.work("maxpool", "fwd", {**p, "kernel": 2, "stride": 2, "padding": 0}, "float32")
    assert pool["bytes"] == (e + e // 4) * 4 + 8 * (e // 4)


def test_bad_shapes_and_dtypes_are_user_errors():
    with pytest.raises(UserError, match="missing 'F'"):
        shapes.work("conv2d", "fwd", dict(N=1, C=1, H=4, W=4), "float32")
    with pytest.raises(UserError, match="unknown dtype"):
        shapes.canonical_dtype("float7")
    assert shapes.canonical_dtype("bf16") == "bfloat16"
    with pytest.raises(UserError, match="unknown compute op"):
        shapes.op_kind("hardswish")


@pytest.mark.parametrize("op,p,factor", [("allreduce", 8, 2 * 7 / 8), ("allgather", 4, 3 / 4),
                                         ("reduce_scatter", 2, 1 / 2), ("alltoall", 8, 7 / 8),
                                         ("broadcast", 8, 1.0), ("sendrecv", 8, 1.0), ("halo", 4, 1.0)])
def test_bus_factors_match_nccl_tests(op, p, factor):
    assert bus_factor(op, p) == pytest.approx(factor)


def test_latency_steps():
    assert latency_steps("allreduce", 8, 1) == (14, 0)
    assert latency_steps("allreduce", 16, 2) == (28, 2)
    assert latency_steps("allgather", 16, 4) == (12, 3)
    assert latency_steps("sendrecv", 16, 1) == (1, 0)
    assert latency_steps("halo", 16, 2) == (0, 1)
    assert tree_latency_steps("allreduce", 64, 8) == (14, 6)
    assert tree_latency_steps("allgather", 64, 8) is None
    with pytest.raises(UserError, match="unknown collective"):
        bus_factor("gather", 4)
