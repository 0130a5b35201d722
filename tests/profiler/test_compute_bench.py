"""Compute benchmarks: FLOP and byte counts by hand, the shape grid's coverage, and that each case runs
the operation it claims (checked against autograd / torch reference results)."""
import math

import pytest
import torch

from profiler import bench_compute as bc
from profiler.cases import measure_case

CONV = {"N": 2, "C": 3, "F": 4, "H": 9, "W": 7, "kernel": 3, "stride": 2, "padding": 1}


def test_gemm_counts_by_hand():
    assert bc.gemm_flops(2, 3, 4) == 2 * 2 * 3 * 4
    assert bc.gemm_bytes(2, 3, 4, 4) == 4 * (2 * 4 + 4 * 3 + 2 * 3)


def test_conv2d_counts_by_hand():
    # output H = (9 + 2 - 3)//2 + 1 = 5, W = (7 + 2 - 3)//2 + 1 = 4
    assert bc.conv_spatial(CONV) == ([9, 7], [5, 4])
    assert bc.conv_flops(CONV) == 2 * 2 * 4 * (5 * 4) * 3 * 9
    assert bc.conv_bytes(CONV, 2) == 2 * (2 * 3 * 9 * 7 + 4 * 3 * 9 + 2 * 4 * 5 * 4)


def test_conv3d_counts_by_hand():
    p = {"N": 1, "C": 2, "F": 5, "D": 4, "H": 4, "W": 4, "kernel": 2, "stride": 2, "padding": 0}
    assert bc.conv_flops(p) == 2 * 1 * 5 * 8 * 2 * 8
    assert bc.conv_bytes(p, 4) == 4 * (2 * 64 + 5 * 2 * 8 + 5 * 8)


def test_memory_op_counts_by_hand():
    p = {"N": 2, "C": 3, "H": 4, "W": 4}
    n = 96
    assert bc.memory_op_counts("relu", "fwd", p, 4) == (n, 2 * n * 4)
    assert bc.memory_op_counts("relu", "bwd", p, 4) == (n, 3 * n * 4)
    assert bc.memory_op_counts("add", "fwd", p, 2) == (n, 3 * n * 2)
    assert bc.memory_op_counts("batchnorm", "fwd", p, 4) == (8 * n, 2 * n * 4)
    assert bc.memory_op_counts("batchnorm", "bwd", p, 4) == (12 * n, 3 * n * 4)
    pool = {**p, "kernel": 3, "stride": 2, "padding": 1}  # 4x4 -> 2x2 outputs
    out = 2 * 3 * 2 * 2
    assert bc.memory_op_counts("maxpool", "fwd", pool, 4) == (out * 9, 4 * (n + out) + 8 * out)
    assert bc.memory_op_counts("maxpool", "bwd", pool, 4) == (n, 4 * (out + n) + 8 * out)


def test_counts_agree_with_calibrates_shape_model():
    """calibrate/shapes.py re-derives work from sample params; both sides must count the same bytes/FLOPs."""
    from calibrate import shapes
    assert shapes.work("conv2d", "fwd", CONV, "float32")["flops"] == bc.conv_flops(CONV)
    assert shapes.work("conv2d", "fwd", CONV, "float32")["bytes"] == bc.conv_bytes(CONV, 4)
    pool = {"N": 2, "C": 3, "H": 4, "W": 4, **bc.MAXPOOLS[0]}
    assert shapes.work("maxpool", "fwd", pool, "float32")["bytes"] == bc.memory_op_counts("maxpool", "fwd", pool, 4)[1]


def test_split_variants_shrink_one_dimension_each():
    base = {"N": 8, "C": 64, "F": 64, "H": 56, "W": 56, "kernel": 3, "stride": 1, "padding": 1}
    variants = dict(bc.split_variants(base, True))
    assert set(variants) == {"base", "batch", "filter", "channel", "spatial"}
    assert variants["batch"]["N"] == 2 and variants["filter"]["F"] == 16 and variants["channel"]["C"] == 16
    assert (variants["spatial"]["H"], variants["spatial"]["W"]) == (28, 28)
    assert bc.split_variants(base, False) == [("base", base)]
    tiny_c = {**base, "C": 3}  # C/4 would be 0: no channel split
    assert "channel" not in dict(bc.split_variants(tiny_c, True))


@pytest.mark.parametrize("quick", [True, False])
def test_cpu_grid_is_diverse_enough_to_fit_split_shapes(quick):
    cases = bc.plan_compute("cpu", quick)
    kinds = {c.benchmark for c in cases}
    assert {"gemm", "conv2d", "conv3d", "batchnorm", "relu", "maxpool", "add"} <= kinds
    for bench in ("conv2d", "conv3d"):
        convs = [c for c in cases if c.benchmark == bench]
        assert {c.variant for c in convs} == {"fwd", "bwd_data", "bwd_weight"}
        assert {"batch", "filter", "channel", "spatial"} <= {c.tags.get("split") for c in convs}
        for dim in ("N", "C", "F", "H"):  # small and large variants of every dimension
            values = {c.params[dim] for c in convs}
            assert max(values) >= 4 * min(values), (bench, dim, values)
    gemm_work = [c.flops for c in cases if c.benchmark == "gemm"]
    assert max(gemm_work) >= 1000 * min(gemm_work)
    assert {c.dtype for c in cases} == {"float32"}


def test_gpu_grid_has_every_dtype_and_records_flags():
    cases = bc.plan_compute("cuda", False)  # planning allocates nothing, so this runs on CPU
    assert {c.dtype for c in cases} == set(bc.GPU_DTYPES)
    tf32 = [c for c in cases if c.dtype == "tf32"]
    assert tf32 and all(c.tags["matmul_allow_tf32"] and c.tags["cudnn_benchmark"] for c in tf32)
    assert all(not c.tags["cudnn_allow_tf32"] for c in cases if c.dtype == "float32")
    assert not any(c.dtype == "tf32" and c.benchmark == "relu" for c in cases)


def test_tiny_grid_from_environment(monkeypatch):
    monkeypatch.setenv(bc.GRID_ENV, "tiny")
    assert bc.choose_grid("cpu", False).name == "tiny"
    monkeypatch.setenv(bc.GRID_ENV, "huge")
    with pytest.raises(bc.UserError, match="PARAORACLE_GRID"):
        bc.choose_grid("cpu", False)


def test_conv_cases_compute_the_passes_they_name():
    torch.manual_seed(0)
    fwd, bwd_data, bwd_weight = bc.conv_cases(CONV, "float32", "cpu")
    assert fwd.build()().shape == (2, 4, 5, 4)
    dx = bwd_data.build()()[0]
    assert dx.shape == (2, 3, 9, 7)
    dw = bwd_weight.build()()[1]
    assert dw.shape == (4, 3, 3, 3)
    # the backward output matches autograd for the same tensors
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, padding=1)
    dy = torch.randn_like(y)
    y.backward(dy)
    dx, dw, _ = torch.ops.aten.convolution_backward(dy, x.detach(), w.detach(), None, [1, 1], [1, 1], [1, 1],
                                                     False, [0, 0], 1, [True, True, False])
    assert torch.allclose(dx, x.grad, atol=1e-5) and torch.allclose(dw, w.grad, atol=1e-4)


def test_gemm_case_writes_the_product():
    case = bc.gemm_case(8, 5, 3, "float32", "cpu")
    out = case.build()()
    assert out.shape == (8, 5)


def test_measure_case_records_counts_and_every_time():
    case = bc.gemm_case(32, 32, 32, "float32", "cpu")
    s = measure_case(case, "cpu", dict(warmup_s=0.002, budget_s=0.01, min_samples=3, max_samples=5))
    assert s.benchmark == "gemm" and s.variant == "fwd" and s.params == {"M": 32, "N": 32, "K": 32}
    assert s.flops == 2 * 32**3 and s.bytes_moved == 4 * 3 * 32 * 32
    assert 3 <= len(s.times_s) <= 5 and all(t > 0 for t in s.times_s)
    assert s.extra["calls_per_sample"] >= 1


def test_backward_copies_compute_the_gradient_and_read_their_own_operands():
    """Copies of a pooling backward share the input the kernel does not read (it only sizes the gradient) and
    clone the max-pool indices, but each reads its own dy and indices, and each computes the gradient autograd
    computes for its dy (batch norm: each copy its own input and statistics)."""
    for shape in ({"N": 2, "C": 3, "H": 8, "W": 8}, {"N": 1, "C": 2, "D": 4, "H": 4, "W": 4}):
        for case in bc.memory_op_cases(shape, "float32", "cpu"):
            if case.variant != "bwd" or case.benchmark not in ("maxpool", "avgpool", "batchnorm"):
                continue
            first, second = case.build(), case.build()
            cells = [{n: c.cell_contents for n, c in zip(f.__code__.co_freevars, f.__closure__)}
                     for f in (first, second)]
            assert cells[0]["dy"].data_ptr() != cells[1]["dy"].data_ptr(), case.label
            if case.benchmark == "maxpool":
                assert cells[0]["x"] is cells[1]["x"], case.label  # only sizes the gradient
                assert torch.equal(cells[0]["idx"], cells[1]["idx"]), case.label
                assert cells[0]["idx"].data_ptr() != cells[1]["idx"].data_ptr(), case.label
            for fn, cell in zip((first, second), cells):
                x = cell["x"].detach().clone().requires_grad_()
                if case.benchmark == "batchnorm":
                    got = fn()[0]
                    y = torch.nn.functional.batch_norm(x, None, None, training=True, eps=1e-5)
                else:
                    got = fn()
                    window = (case.params["kernel"], case.params["stride"], case.params["padding"])
                    pool = {("maxpool", 4): torch.nn.functional.max_pool2d, ("maxpool", 5): torch.nn.functional.max_pool3d,
                            ("avgpool", 4): torch.nn.functional.avg_pool2d, ("avgpool", 5): torch.nn.functional.avg_pool3d}
                    y = pool[(case.benchmark, x.dim())](x, *window)
                (want,) = torch.autograd.grad(y, x, cell["dy"])
                assert torch.allclose(got, want, atol=1e-5), case.label


def test_every_memory_op_case_runs():
    """Every memory-bound op and pass, on a 2-D and a 3-D map, computes what it names: ReLU's output is the
    clamped input, add the sum, batch norm's output has zero mean per channel, every backward returns a gradient
    of the input's shape, a pooling forward the window's output shape (kernel, stride, padding of its params)."""
    from profiler.opmath import window_output_dims

    for shape in ({"N": 1, "C": 2, "H": 6, "W": 6}, {"N": 1, "C": 2, "D": 4, "H": 4, "W": 4}):
        dims = tuple(shape.values())
        cases = bc.memory_op_cases(shape, "float32", "cpu")
        assert {(c.benchmark, c.variant) for c in cases} == set(bc.MEMORY_OP_VARIANTS)
        for case in cases:
            fn = case.build()
            cells = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ())}
            result = fn()
            out = result[0] if isinstance(result, (tuple, list)) else result
            assert torch.isfinite(out).all(), case.label
            if case.benchmark in ("maxpool", "avgpool") and case.variant == "fwd":
                d = len(dims) - 2
                window = ([case.params["kernel"]] * d, [case.params["stride"]] * d, [case.params["padding"]] * d)
                assert tuple(out.shape) == dims[:2] + window_output_dims(dims[2:], *window), case.label
            else:
                assert tuple(out.shape) == dims, case.label
            if (case.benchmark, case.variant) == ("relu", "fwd"):
                assert torch.equal(out, cells["x"].clamp(min=0)), case.label
            if case.benchmark == "add":
                assert torch.equal(out, cells["a"] + cells["b"]), case.label
            if (case.benchmark, case.variant) == ("batchnorm", "fwd"):
                per_channel = out.transpose(0, 1).reshape(shape["C"], -1).mean(dim=1)
                assert torch.allclose(per_channel, torch.zeros(shape["C"]), atol=1e-5), case.label
            assert case.bytes_moved > 0 and case.flops > 0


def test_framework_cases_time_what_they_name():
    from profiler.bench_framework import CHAIN_LENGTHS, VARIANTS, framework_case, plan_framework

    warm = [(v, k) for v in VARIANTS for k in CHAIN_LENGTHS]
    assert [(c.variant, c.params["layers"]) for c in plan_framework("cuda")] == warm
    assert [(c.variant, c.params["layers"]) for c in plan_framework("cpu")] == warm
    assert framework_case("kernel", 3, "cpu").build()() is None  # no-grad relu chain, nothing recorded
    out = framework_case("forward", 3, "cpu").build()()
    names = []
    node = out.grad_fn
    while node is not None:  # the recorded graph: one ReluBackward per layer
        names.append(type(node).__name__)
        node = node.next_functions[0][0] if node.next_functions else None
    assert names[:3] == ["ReluBackward0"] * 3 and len([n for n in names if n.startswith("Relu")]) == 3
    assert framework_case("step", 3, "cpu").build()() is None  # forward + backward ran


def test_cold_chains_hold_the_same_layers_in_two_orders(monkeypatch):
    """Cycled: every layer follows another type (30 type changes); grouped: 5, one per type. The recorded
    graph of the cycled chain alternates the five autograd nodes; measure_cold times every chain once per round,
    its samples aligned by round."""
    from profiler.bench_framework import cold_chain, measure_cold
    from profiler.cold_chains import (COLD_LAYERS, COLD_ORDERS, COLD_REPEATS, COLD_VARIANTS, cold_order,
                                      cold_transitions)
    from profiler.cases import GRID_ENV

    assert sorted(cold_order("cycled")) == sorted(cold_order("grouped"))
    assert cold_order("cycled")[:6] == ["conv", "batchnorm", "relu", "maxpool", "avgpool", "conv"]
    assert cold_order("grouped")[:7] == ["conv"] * 6 + ["batchnorm"]
    assert (cold_transitions("cycled"), cold_transitions("grouped")) == (len(COLD_LAYERS) * COLD_REPEATS,
                                                                         len(COLD_LAYERS))
    node, names = cold_chain("cold_forward", "cycled", "cpu")().grad_fn, []
    while node is not None:
        names.append(type(node).__name__)
        node = next((n for n, _ in node.next_functions if n is not None and "AccumulateGrad" not in type(n).__name__),
                    None)
    assert [n.split("Backward")[0] for n in names[:5]] == ["AvgPool2D", "MaxPool2DWithIndices", "Relu",
                                                           "NativeBatchNorm", "Convolution"]
    assert cold_chain("cold_step", "grouped", "cpu")() is None
    monkeypatch.setenv(GRID_ENV, "tiny")
    samples = measure_cold("cpu", quick=True)
    assert [(s.variant, s.params["order"]) for s in samples] == [(v, o) for v in COLD_VARIANTS for o in COLD_ORDERS]
    assert len({len(s.times_s) for s in samples}) == 1 and all(t > 0 for s in samples for t in s.times_s)


@pytest.mark.gpu
def test_gpu_cases_run_in_every_dtype():
    for dtype in bc.GPU_DTYPES:
        case = bc.conv_cases({**CONV, "C": 8, "F": 8}, dtype, "cuda")[2]
        s = measure_case(case, "cuda", dict(warmup_s=0.002, budget_s=0.01, min_samples=3, max_samples=5))
        assert s.dtype == dtype and all(math.isfinite(t) and t > 0 for t in s.times_s)


@pytest.mark.gpu
def test_cuda_timer_agrees_with_a_synchronised_host_clock():
    """CUDA-event per-call times and a host clock around the same synchronised calls describe the same work
    (loose factor: launch overhead and the L2 flush differ between the two)."""
    import time

    from profiler.timing import Timer

    a = torch.randn(4096, 4096, device="cuda")
    fn = lambda: torch.matmul(a, a)  # noqa: E731
    m = Timer(fn, device="cuda", warmup_s=0.01, budget_s=0.2).measure()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    host_s = (time.perf_counter() - start) / 10
    assert m.device == "cuda" and len(m.times_s) >= 3
    assert host_s / 3 < m.median_s < host_s * 3


def test_small_3d_design_meets_every_channel_pair_twice():
    """Two rotations of the Latin square: every (C, F) pair at two different (size, batch), no shape twice."""
    shapes_3d = bc.small_conv_params(True)
    design = bc.SMALL_CONV_DESIGN[True]
    assert len(shapes_3d) == len({tuple(sorted(p.items())) for p in shapes_3d})
    for c in design["channels"]:
        for f in design["filters"]:
            settings = {(p["D"], p["N"]) for p in shapes_3d if (p["C"], p["F"]) == (c, f)}
            assert len(settings) == 2, (c, f, settings)
    assert all(bc.conv_flops(p) <= bc.SMALL_MAX_FLOPS or p["N"] == 1 for p in shapes_3d)


def test_pointwise_design_meets_every_channel_pair_at_both_strides_and_large_batches():
    """1x1(x1) convolutions, every (C, F) pair once, stride 1 and 2 each met at every size and at small and large
    batches (not tied to one of them), no shape twice, under the FLOP cap; planned on CPU only."""
    for three_d in (False, True):
        design = bc.POINTWISE_CONV_DESIGN[three_d]
        shapes = bc.small_conv_params(three_d, bc.POINTWISE_CONV_DESIGN)
        assert len(shapes) == len(design["channels"]) * len(design["filters"])
        assert len(shapes) == len({tuple(sorted(p.items())) for p in shapes})
        assert {(p["kernel"], p["padding"]) for p in shapes} == {(1, 0)}
        for size in design["sizes"]:
            assert {p["stride"] for p in shapes if p["H"] == size} == {1, 2}, size
        assert {p["stride"] for p in shapes if p["N"] == max(design["batches"])} == {1, 2}
        assert all(bc.conv_flops(p) <= bc.SMALL_MAX_FLOPS for p in shapes)
    layers = {c.tags.get("layer") for c in bc.plan_compute("cpu", quick=True)}
    assert "pointwise_design" in layers
    assert "pointwise_design" not in {c.tags.get("layer") for c in bc.plan_compute("cuda", quick=True)}


def test_quick_memory_sweep_has_several_shapes_in_each_allocation_regime():
    """Outputs of at least glibc's pinned mmap threshold get fresh pages every call (profiler.allocator): the
    sweep needs several shapes on both sides of it, and distinct shapes throughout."""
    from profiler.allocator import MMAP_THRESHOLD_BYTES

    quick = bc.MEMORY_OP_SHAPES_QUICK
    assert len(quick) == len({tuple(sorted(s.items())) for s in quick})
    output_bytes = [4 * bc.activation_elems(s) for s in quick]
    assert sum(b >= MMAP_THRESHOLD_BYTES for b in output_bytes) >= 4
    assert sum(MMAP_THRESHOLD_BYTES / 8 < b < MMAP_THRESHOLD_BYTES for b in output_bytes) >= 4


def test_transformer_cases_compute_the_passes_they_name(monkeypatch):
    """bmm's backward calls equal autograd's gradients of C = A B; the counts are profiler.opmath's."""
    import torch.nn.functional as F

    from profiler import bench_compute, opmath
    from profiler.bench_compute import bmm_cases, sdpa_cases, token_op_case

    made = []  # every operand a case draws, in order

    def recording_tensor(shape, dtype, device):
        made.append(torch.randn(*shape))
        return made[-1]

    monkeypatch.setattr(bench_compute, "_tensor", recording_tensor)
    cases = {c.variant: c for c in bmm_cases(2, 3, 4, 5, "float32", "cpu")}
    assert set(cases) == {"fwd", "bwd_data", "bwd_weight"}
    assert all(c.flops == opmath.bmm_flops(2, 3, 4, 5) for c in cases.values())
    for variant, case in cases.items():
        made.clear()
        out = case.build()()
        a, b, dc = (t.clone().requires_grad_() for t in made if t.dim() == 3)  # A (B, M, K), B (B, K, N), dC
        grad_a, grad_b = torch.autograd.grad(torch.bmm(a, b), (a, b), dc)
        expected = {"fwd": torch.bmm(a, b).detach(), "bwd_data": grad_a, "bwd_weight": grad_b}[variant]
        assert torch.allclose(out, expected), variant
    sdpa = {c.variant: c for c in sdpa_cases(2, 16, 8, 1, "float32", "cpu")}
    assert sdpa["bwd"].flops == 2.5 * sdpa["fwd"].flops == 2.5 * opmath.sdpa_flops(2, 16, 16, 8, "fwd", True)
    dq, dk, dv = sdpa["bwd"].build()()
    assert dq.shape == dk.shape == dv.shape == (2, 16, 8)
    assert sdpa["fwd"].build()().shape == (2, 16, 8)
    shape = dict(N=2, C=3, H=1, W=8)
    for op in ("layernorm", "gelu", "softmax"):
        fwd, bwd = (token_op_case(op, v, shape, "float32", "cpu") for v in ("fwd", "bwd"))
        assert fwd.bytes_moved == opmath.element_pass_bytes(op, "fwd", 48, 4)
        assert bwd.bytes_moved == opmath.element_pass_bytes(op, "bwd_data", 48, 4)
        assert fwd.build()() is not None and bwd.build()() is not None
    made.clear()
    softmax = token_op_case("softmax", "fwd", shape, "float32", "cpu").build()()
    assert torch.allclose(softmax, F.softmax(made[0], -1))


def test_quick_cpu_grid_has_every_transformer_family():
    from profiler.bench_compute import plan_compute

    families = {(c.benchmark, c.variant) for c in plan_compute("cpu", quick=True)}
    assert {("bmm", "fwd"), ("bmm", "bwd_data"), ("bmm", "bwd_weight"), ("sdpa", "fwd"), ("sdpa", "bwd"),
            ("layernorm", "fwd"), ("layernorm", "bwd"), ("gelu", "bwd"), ("softmax", "bwd")} <= families


def test_cpu_operands_are_standard_normal_copies_that_differ_between_operands():
    """CPU operands come from a pool drawn once (torch.randn per operand was a fifth of a quick calibration):
    the right shape and dtype, standard-normal values, an operand larger than the pool filled throughout, and
    two operands of one case not equal."""
    big = bc._tensor((3, bc.CPU_POOL_ELEMENTS // 2 + 5), "float32", "cpu")
    assert big.shape == (3, bc.CPU_POOL_ELEMENTS // 2 + 5) and big.dtype == torch.float32
    assert abs(float(big.mean())) < 0.01 and abs(float(big.std()) - 1) < 0.01
    assert torch.isfinite(big).all() and (big != 0).float().mean() > 0.99
    a, b = bc._tensor((64, 64), "float32", "cpu"), bc._tensor((64, 64), "float32", "cpu")
    assert not torch.equal(a, b)
    assert bc._like(a, "bfloat16").dtype == torch.bfloat16 and bc._like(a, "bfloat16").shape == a.shape


def test_cpu_operands_are_aligned_distinct_slices_of_one_arena(monkeypatch):
    """Operands take consecutive cache-line-aligned slices of the dtype's arena (ARENA_LLC_MULTIPLE last-level
    caches), wrapping to its start; one larger than the arena gets its own memory."""
    from profiler import caches

    monkeypatch.setattr(caches, "cpu_last_level_cache_bytes", lambda: 4096)  # a 12 KiB arena: 3072 float32
    monkeypatch.setattr(bc, "_ARENAS", {})
    a, b = bc._tensor((10, 10), "float32", "cpu"), bc._tensor((7,), "float32", "cpu")
    arena = bc._ARENAS["float32"][0]
    assert arena.numel() == bc.ARENA_LLC_MULTIPLE * 4096 // 4
    assert a.data_ptr() == arena.data_ptr() and b.data_ptr() == arena.data_ptr() + 112 * 4  # 100 -> 112 elements
    assert all(t.data_ptr() % 64 == 0 and t.is_contiguous() for t in (a, b))
    c = bc._tensor((3000,), "float32", "cpu")  # does not fit after b: wraps to the start
    assert c.data_ptr() == arena.data_ptr() and not torch.equal(a.view(-1)[:7], b)
    big = bc._tensor((4000,), "float32", "cpu")
    assert big.untyped_storage().data_ptr() != arena.untyped_storage().data_ptr() and (big != 0).all()


def test_operand_copies_cover_the_rotation_by_hand():
    from profiler.cases import MAX_OPERAND_COPIES, ROTATION_LLC_MULTIPLE, operand_copies

    llc = 32 * 2**20
    assert operand_copies(2**20, llc) == math.ceil(ROTATION_LLC_MULTIPLE * 32)  # 1 MiB of operands: 48 sets
    assert operand_copies(64 * 2**20, llc) == 1  # larger than the rotation: comes from memory on its own
    assert operand_copies(4096, llc) == MAX_OPERAND_COPIES  # a few KB: capped, stays cache-resident
    assert operand_copies(None, llc) == operand_copies(0, llc) == 1


def test_a_rotating_case_cycles_through_independent_operand_sets():
    from profiler.cases import rotating

    built = []

    def build():
        mine = torch.zeros(1)
        built.append(mine)

        def call():
            mine.add_(1)
        return call

    call = rotating(build, 3)
    for _ in range(7):
        call()
    assert len(built) == 3 and [int(t) for t in built] == [3, 2, 2]  # in turn, each set its own tensor
    built.clear()
    rotating(build, 1)
    assert len(built) == 1


def test_cpu_compute_points_rotate_and_record_their_copies(monkeypatch):
    from profiler.cases import GRID_ENV, operand_copies

    monkeypatch.setenv(GRID_ENV, "tiny")
    cases = bc.plan_compute("cpu", quick=True)
    assert cases and all(c.rotate for c in cases)
    case = next(c for c in cases if c.benchmark == "gemm")
    timer = dict(warmup_s=0.002, budget_s=0.01, min_samples=3, max_samples=5)
    llc = 2**20
    s = measure_case(case, "cpu", timer, llc_bytes=llc)
    assert s.extra["operand_copies"] == operand_copies(case.bytes_moved, llc) > 1
    assert "operand_copies" not in measure_case(case, "cpu", timer).extra  # no cache size given: one set
    case.rotate = False
    assert "operand_copies" not in measure_case(case, "cpu", timer, llc_bytes=llc).extra


def test_average_pooling_cases_by_hand_and_against_nn_avgpool():
    """avgpool fwd reads x and writes y (no indices), bwd reads dy and writes dx; a 2x2/2 window and, on square
    maps, the global window of a classifier head; both passes equal nn.AvgPool2d's forward and autograd."""
    shape = {"N": 2, "C": 3, "H": 8, "W": 8}
    cases = [c for c in bc.memory_op_cases(shape, "float32", "cpu") if c.benchmark == "avgpool"]
    assert [(c.variant, c.params["kernel"], c.params["stride"]) for c in cases] == \
        [("fwd", 2, 2), ("fwd", 8, 8), ("bwd", 2, 2), ("bwd", 8, 8)]
    n, out2, out_global = 2 * 3 * 64, 2 * 3 * 16, 2 * 3
    assert [c.bytes_moved for c in cases] == [4 * (n + out2), 4 * (n + out_global), 4 * (out2 + n),
                                              4 * (out_global + n)]
    assert cases[0].flops == out2 * 4 and cases[2].flops == n
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    for kernel in (2, 8):
        y = torch.nn.AvgPool2d(kernel, kernel)(x)
        dy = torch.randn_like(y)
        (dx,) = torch.autograd.grad(y, x, dy)
        fwd = torch.ops.aten.avg_pool2d(x.detach(), [kernel] * 2, [kernel] * 2, [0, 0], False, True, None)
        bwd = torch.ops.aten.avg_pool2d_backward(dy, x.detach(), [kernel] * 2, [kernel] * 2, [0, 0], False, True,
                                                 None)
        assert torch.allclose(fwd, y) and torch.allclose(bwd, dx)
    for case in cases:
        assert case.build()().shape in ((2, 3, 4, 4), (2, 3, 1, 1), (2, 3, 8, 8))
    rectangular = [c for c in bc.memory_op_cases({"N": 1, "C": 2, "H": 8, "W": 4}, "float32", "cpu")
                   if c.benchmark == "avgpool"]
    assert {c.params["kernel"] for c in rectangular} == {2}  # no global window on a rectangular map


def test_fp8_linear_cases_run_the_three_tn_products_on_cpu():
    """The FP8 linear cases (what a GPU with FP8 tensor cores measures for --dtype fp8) build and run through
    torch._scaled_mm here too: each pass gives the result its autograd call would, 2MNK FLOPs, one byte per operand."""
    from profiler.opmath import gemm_bytes, gemm_flops

    M, N, K = 32, 48, 64
    cases = bc.fp8_linear_cases(M, N, K, "cpu")
    assert [c.variant for c in cases] == ["fwd", "bwd_data", "bwd_weight"]
    shapes = {"fwd": (M, N), "bwd_data": (M, K), "bwd_weight": (N, K)}
    for case in cases:
        out = case.build()()
        assert tuple(out.shape) == shapes[case.variant] and out.dtype == torch.bfloat16
        assert case.dtype == "float8" and case.params == {"M": M, "N": N, "K": K}
        assert case.flops == gemm_flops(M, N, K) and case.bytes_moved == gemm_bytes(M, N, K, 1)


def test_fp8_cases_join_a_gpu_grid_only_where_the_gpu_has_fp8(monkeypatch):
    monkeypatch.setattr(bc, "fp8_capable", lambda device: False)
    assert not any(c.dtype == "float8" for c in bc.plan_compute("cuda", quick=True))
    monkeypatch.setattr(bc, "fp8_capable", lambda device: True)
    fp8 = [c for c in bc.plan_compute("cuda", quick=True) if c.dtype == "float8"]
    assert fp8 and all(c.benchmark == "linear" for c in fp8)
    assert all(v % 16 == 0 for c in fp8 for v in c.params.values())  # FP8 GEMMs need multiples of 16
    assert len(fp8) == 3 * len({tuple(c.params.items()) for c in fp8})
    monkeypatch.undo()
    assert not bc.fp8_capable("cpu")
