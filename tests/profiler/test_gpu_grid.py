"""The GPU calibration grid (issue 37 item 5): DeepBench's shape list (`--grid deepbench`), the default grid's
coverage of what the GPU kernel model needs and its point budget, and calls timed in a training step's state
(results from the allocator, the host's reused weight gradient, operands rotating through L2)."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

import profiler.bench_compute as bc
import profiler.bench_deepbench as bd
import profiler.bench_memory as bm
from calibrate import gpu_kernels as gk
from profiler import cmd_calibrate
from profiler.cases import ROTATION_L2_MULTIPLE, measure_case, operand_copies
from profiler.deepbench import read_deepbench
from profiler.errors import UserError
from profiler.profile import Sample

WORKBOOKS = sorted(bd.WORKBOOKS_DIR.glob("*.xlsx"))
TINY_TIMER = dict(warmup_s=0.001, budget_s=0.005, min_samples=2, max_samples=3)
H100_L2_BYTES = 50 * 2**20


# ---- --grid deepbench ------------------------------------------------------------------------------------------
def test_the_shipped_shape_list_is_the_one_the_workbooks_give(tmp_path):
    out = tmp_path / "shapes.yaml"
    assert bd.main([str(p) for p in WORKBOOKS] + ["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == bd.SHAPES_FILE.read_text(encoding="utf-8")


def test_deepbench_grid_times_every_workbook_row_in_both_precisions():
    cases = bd.plan_deepbench("cuda")  # planning allocates nothing: runs without a GPU
    v100, _ = read_deepbench(bd.WORKBOOKS_DIR / "DeepBench_NV_V100.xlsx")
    for dtype in bd.DEEPBENCH_DTYPES:
        mine = Counter((c.benchmark, c.variant) for c in cases if c.dtype == dtype)
        theirs = Counter((s.benchmark, s.variant) for s in v100 if s.dtype == dtype and s.benchmark != "allreduce")
        assert mine == theirs == {("gemm", "fwd"): 160, ("conv2d", "fwd"): 94, ("conv2d", "bwd_data"): 84,
                                  ("conv2d", "bwd_weight"): 94}
    for path in WORKBOOKS:  # every workbook times the same shapes (the older ones also input layers' bwd_data)
        samples, _ = read_deepbench(path)
        for op in ("gemm", "conv2d"):
            dtype = samples[0].dtype
            shapes = Counter(repr(sorted(s.params.items())) for s in samples
                             if s.benchmark == op and s.variant == "fwd" and s.dtype == dtype)
            assert shapes == Counter(repr(sorted(c.params.items())) for c in cases
                                     if c.benchmark == op and c.variant == "fwd" and c.dtype == "float32"), path


def test_deepbench_points_carry_the_importers_params_application_and_flags():
    cases = bd.plan_deepbench("cuda")
    v100, _ = read_deepbench(bd.WORKBOOKS_DIR / "DeepBench_NV_V100.xlsx")
    for dtype in bd.DEEPBENCH_DTYPES:  # row by row, in DeepBench's order
        for variant in ("fwd", "bwd_data", "bwd_weight"):
            theirs = [s for s in v100 if s.dtype == dtype and s.variant == variant and s.benchmark != "allreduce"]
            mine = [c for c in cases if c.dtype == dtype and c.variant == variant]
            assert len(mine) == len(theirs) > 0
            for case, s in zip(mine, theirs):
                assert (case.benchmark, case.params) == (s.benchmark, s.params)
                assert case.tags["application"] == s.extra["application"] and case.tags["grid"] == "deepbench"
                assert case.flops == s.flops and case.bytes_moved == s.bytes_moved
                assert case.tags["cudnn_benchmark"] is True and case.tags["matmul_allow_tf32"] is False and case.rotate
            if variant == "fwd":
                for op, rows in (("gemm", 160), ("conv2d", 94)):
                    assert [c.tags["deepbench_row"] for c in mine if c.benchmark == op] == list(range(rows))
    conv = next(c for c in cases if c.benchmark == "conv2d" and c.params["kernel"] == [5, 20])
    assert conv.params["stride"] == [2, 2] and conv.params["padding"] == [0, 0]
    assert {(c.params["transpose_a"], c.params["transpose_b"]) for c in cases if c.benchmark == "gemm"} == {
        (False, False), (True, False), (False, True)}


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_a_deepbench_gemm_hands_cublas_deepbenchs_operand_order(ta, tb):
    """Row-major X (N, K) and Y (K, M): a transposed view exactly where DeepBench's column-major operand is
    transposed (torch passes cuBLAS 't' for a transposed view), and X Y is DeepBench's C = op(A) op(B) stored
    column-major."""
    m, n, k = 5, 3, 4
    x, y = bd.gemm_operands(m, n, k, ta, tb, "float32", "cpu")
    assert x.shape == (n, k) and y.shape == (k, m)
    assert x.is_contiguous() == (not tb) and y.is_contiguous() == (not ta)
    op_a, op_b = y.T, x.T  # (M, K) and (K, N)
    assert torch.allclose(torch.mm(x, y).T, op_a @ op_b)


def test_deepbench_cases_run_and_record_their_shape_on_the_cpu():
    row = {"N": 2, "C": 3, "H": 9, "W": 12, "F": 4, "kernel": [3, 5], "stride": [2, 1], "padding": [1, 2],
           "application": "toy", "passes": ["fwd", "bwd_data", "bwd_weight"]}
    cases = bd.conv_cases(row, "float32", "cpu", {"application": "toy"})
    for case in cases:
        s = measure_case(case, "cpu", TINY_TIMER)
        assert s.params["kernel"] == [3, 5] and s.params["stride"] == [2, 1] and s.extra["application"] == "toy"
    out = cases[0].build()()
    assert tuple(out.shape) == (2, 4, 5, 12)  # (9 + 2 - 3) // 2 + 1, (12 + 4 - 5) + 1
    gemm = bd.gemm_case({"M": 6, "N": 2, "K": 8, "transpose_a": True, "transpose_b": False}, "float32", "cpu", {})
    assert tuple(gemm.build()().shape) == (2, 6)


def test_grid_deepbench_needs_a_gpu_and_the_whole_list(monkeypatch, tmp_path, capsys):
    from profiler.cli import main

    code = main(["calibrate", "--device", "cpu", "--grid", "deepbench", "--out", str(tmp_path / "p.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "--grid deepbench" in err and len(err.strip().splitlines()) == 1
    args = type("Args", (), {"grid": "deepbench", "quick": True})()
    with pytest.raises(UserError, match="drop --quick"):
        cmd_calibrate.check_grid(args, "cuda")
    assert not (tmp_path / "p.yaml").exists()


# ---- the default GPU grid --------------------------------------------------------------------------------------
def _gpu_sections(monkeypatch, quick: bool) -> dict[str, int]:
    """Points of every section a plain `profiler calibrate --device cuda` runs alone, on an H100 (50 MiB L2, FP8)."""
    monkeypatch.setattr(bm, "last_level_cache_bytes", lambda device: H100_L2_BYTES)
    monkeypatch.setattr(bm, "gpu_stream_kernels", lambda: ("torch", None))
    monkeypatch.setattr(bc, "fp8_capable", lambda device: True)
    sections = [s for s in cmd_calibrate.parse_sections(None, "cuda") if s != "collectives"]
    return {name: len(cmd_calibrate.section_sweep(name, cmd_calibrate.plan_section(name, "cuda", quick), "cuda"))
            for name in sections}


def test_the_full_gpu_grid_fits_three_minutes_of_an_h100(monkeypatch):
    """The H200 measured 2005 of 2668 points in 200 s (0.0998 s a point, build, cuDNN's search and timing
    included): at that pace the whole grid must finish in GPU_GRID_BUDGET_S (3 minutes), at most 1804 points."""
    assert bc.GPU_SECONDS_PER_POINT == pytest.approx(200 / 2005)
    budget = math.floor(bc.GPU_GRID_BUDGET_S / bc.GPU_SECONDS_PER_POINT)
    assert budget == 1804
    full, quick = _gpu_sections(monkeypatch, False), _gpu_sections(monkeypatch, True)
    assert sum(full.values()) <= budget, full
    assert sum(quick.values()) < sum(full.values())
    assert full["compute"] > 1400  # the budget is spent on compute, not lost


def test_the_full_gpu_grid_measures_what_the_kernel_model_needs():
    cases = bc.plan_compute("cuda", False)
    for dtype in ("float32", "tf32", "float16", "bfloat16"):
        gemms = [c.params for c in cases if c.dtype == dtype and c.benchmark == "gemm"]
        assert any(8 <= p["M"] <= 64 for p in gemms) and any(8 <= p["N"] <= 64 for p in gemms)
        assert max(p["K"] for p in gemms) >= 100_000
        assert {(p["transpose_a"], p["transpose_b"]) for p in gemms} == {(False, False), (True, False), (False, True),
                                                                         (True, True)}
        # the model reads the transposes of a measured GEMM
        transposed = next(p for p in gemms if p["transpose_a"])
        assert gk.transposed(*gk.as_kernel_call("gemm", "fwd", transposed)[::2])
        convs = [c for c in cases if c.dtype == dtype and c.benchmark == "conv2d"]
        for kernel in (1, 3, 5, 7):
            for stride in (1, 2):
                passes = {c.variant for c in convs if c.params["kernel"] == kernel and c.params["stride"] == stride}
                assert passes == {"fwd", "bwd_data", "bwd_weight"}, (dtype, kernel, stride)
        assert {3, 64, 256, 512} <= {c.params["C"] for c in convs}
        assert min(c.params["H"] for c in convs) <= 7 and max(c.params["H"] for c in convs) >= 224
        assert all(c.tags["cudnn_benchmark"] and c.rotate for c in cases if c.dtype == dtype)
    linears = {(c.params["M"], c.params["N"], c.params["K"]) for c in cases if c.benchmark == "linear"}
    assert min(m for m, _, _ in linears) == 1 and max(k for _, _, k in linears) >= 25088


@pytest.mark.parametrize("quick", [False, True])
def test_the_gpu_grids_measure_grouped_convolutions_as_their_own_family(quick):
    """Depthwise (groups = C) and 32-group convolutions in every dtype and pass, both kernel sizes and strides:
    their samples fit the conv2d_grouped family (calibrate.shapes.family_op), not the dense convolutions'."""
    from calibrate.fit import compute_family

    cases = bc.plan_compute("cuda", quick)
    for dtype in ("float32", "tf32", "float16", "bfloat16"):
        grouped = [c for c in cases if c.dtype == dtype and c.params.get("groups", 1) > 1]
        assert {c.variant for c in grouped} == {"fwd", "bwd_data", "bwd_weight"}
        assert any(c.params["groups"] == c.params["C"] for c in grouped)  # depthwise
        assert any(1 < c.params["groups"] < c.params["C"] for c in grouped)  # ResNeXt's groups
        assert {c.params["kernel"] for c in grouped} == {3, 5} and {c.params["stride"] for c in grouped} == {1, 2}
        assert all(c.tags["cudnn_benchmark"] and c.rotate for c in grouped)
    sample = Sample(benchmark="conv2d", variant="bwd_weight", device="cuda", dtype="float16",
                                  threads=1, params=grouped[0].params, times_s=[1e-4])
    assert compute_family(sample) == "conv2d_grouped/bwd_weight/float16"


def test_a_grouped_convolution_case_runs_all_three_passes():
    params = dict(N=2, C=8, F=8, H=6, W=6, kernel=3, stride=2, padding=1, groups=4)
    for case in bc.conv_cases(params, "float32", "cpu"):
        s = measure_case(case, "cpu", TINY_TIMER)
        assert s.params["groups"] == 4 and len(s.times_s) >= 2 and min(s.times_s) > 0
    assert bc.conv_flops(params) == 2 * 2 * 8 * 3 * 3 * (8 // 4) * 9  # N F P Q (C / groups) k^2


def test_the_cpu_grids_keep_their_gemms_untransposed_and_preallocated():
    cpu = [c for c in bc.plan_compute("cpu", True) if c.benchmark == "gemm"]
    assert [(c.params["M"], c.params["N"], c.params["K"]) for c in cpu] == bc.GEMM_SHAPES_QUICK
    assert all(set(c.params) == {"M", "N", "K"} for c in cpu)
    fn = bc.gemm_case(4, 6, 8, "float32", "cpu").build()
    assert fn() is fn()
    a = bc.gemm_case(4, 6, 8, "float32", "cpu", transpose_a=True)
    assert a.params["transpose_a"] is True and tuple(a.build()().shape) == (4, 6)


# ---- calls in a training step's state --------------------------------------------------------------------------
def test_linear_weight_gradient_reuses_its_buffer_on_the_host():
    """A training step's weight-gradient call is timed without a fresh (N, K) result per call: the host benchmark
    writes it into the point's own buffer (same storage every call; the cost model adds the first touch)."""
    case = next(c for c in bc.linear_cases(4, 6, 8, "float32", "cpu") if c.variant == "bwd_weight")
    fn = case.build()
    (dw1, db1), (dw2, db2) = fn(), fn()
    assert dw1.data_ptr() == dw2.data_ptr() and db1.data_ptr() == db2.data_ptr()
    ref_dy, ref_x = torch.randn(4, 6), torch.randn(4, 8)
    out_w, out_b = torch.empty(6, 8), torch.empty(1, 6)
    bc.linear_bwd_weight(ref_dy, ref_x, out_w, out_b)
    assert torch.allclose(out_w, ref_dy.T @ ref_x) and torch.allclose(out_b, ref_dy.sum(0, keepdim=True))
    other = [c for c in bc.linear_cases(4, 6, 8, "float32", "cpu") if c.variant != "bwd_weight"]
    for c in other:  # forward and input gradient: fresh results, as autograd allocates them
        f = c.build()
        assert f() is not f()


def test_gpu_points_rotate_through_twice_the_l2():
    assert operand_copies(2**20, H100_L2_BYTES, ROTATION_L2_MULTIPLE) == 64  # capped
    assert operand_copies(10 * 2**20, H100_L2_BYTES, ROTATION_L2_MULTIPLE) == 10
    assert operand_copies(200 * 2**20, H100_L2_BYTES, ROTATION_L2_MULTIPLE) == 1


def test_shapes_file_points_run_under_their_dtypes_flags(tmp_path):
    from profiler.shape_file import load_shape_cases

    path = tmp_path / "shapes.yaml"
    path.write_text("shapes:\n  - {op: linear, params: {M: 8, N: 16, K: 32}, dtype: tf32}\n"
                    "  - {op: conv2d, params: {N: 2, C: 4, F: 8, H: 8, W: 8, kernel: 3}, dtype: float16}\n")
    cases = load_shape_cases(str(path), "cuda", bc.GPU_DTYPES)
    assert all(c.tags["cudnn_benchmark"] for c in cases)
    assert {c.dtype: c.tags["matmul_allow_tf32"] for c in cases} == {"tf32": True, "float16": False}


@pytest.mark.gpu
def test_gpu_results_come_from_the_caching_allocator():
    """A GPU call allocates its result as autograd does; the next call gets the block the last one freed."""
    for case in (bc.gemm_case(64, 64, 64, "float32", "cuda"),
                 bc.memory_op_case("relu", "fwd", {"N": 2, "C": 4, "H": 8, "W": 8}, "float32", "cuda"),
                 next(c for c in bc.linear_cases(8, 64, 32, "float32", "cuda") if c.variant == "bwd_weight")):
        fn = case.build()
        first = fn()
        first = first[0] if isinstance(first, tuple) else first
        pointer = first.data_ptr()
        del first
        second = fn()
        second = second[0] if isinstance(second, tuple) else second
        assert second.data_ptr() == pointer, case.label


@pytest.mark.gpu
def test_gpu_points_record_their_operand_copies():
    case = bc.conv_cases({"N": 2, "C": 8, "F": 8, "H": 16, "W": 16, "kernel": 3, "stride": 1, "padding": 1},
                         "float32", "cuda")[0]
    case.rotate = True
    s = measure_case(case, "cuda", TINY_TIMER, llc_bytes=bm.last_level_cache_bytes("cuda"))
    assert s.extra["operand_copies"] > 1


def test_the_full_gpu_grid_times_cosmoflows_own_layers_in_half_precision():
    """MLPerf HPC CosmoFlow's first four 3-D convolutions at one 128^3 sample, every pass, in fp16 and bf16 (the
    runs' precision), in the full grid only: what a GPU session needs to settle the 3-D tensor-core efficiency."""
    def cosmo(quick):
        return {(c.dtype, c.variant, c.params["C"], c.params["F"], c.params["D"], c.params["N"])
                for c in bc.plan_compute("cuda", quick) if c.tags.get("layer", "").startswith("cosmo_l")}
    full = cosmo(False)
    layers = {(4, 32, 128), (32, 64, 64), (64, 128, 32), (128, 256, 16)}
    assert full == {(d, v, c, f, s, 1) for d in ("float16", "bfloat16") for v in ("fwd", "bwd_data", "bwd_weight")
                    for c, f, s in layers}
    assert not cosmo(True)
