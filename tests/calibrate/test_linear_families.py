"""Linear layers timed as autograd runs them: the benchmark cases run the calls (and operand layouts) of
nn.Linear's forward and backward, the grids cover skinny batches, the fit makes linear/<pass> families, and
the cost model and the predictor use them when a profile has them (and the forward-GEMM substitution when
it has not)."""
from collections import Counter

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from calibrate.cost_model import gemm_backward_as_forward, load_cost_model
from calibrate.fit import fit_profile
from calibrate.synthetic import conv_samples, profile_with, stream_samples
from predictor.api import predict_all
from predictor.trace import trace_module
from profiler import bench_compute as bc

M, N, K = 4, 8, 16  # batch, out features, in features


def _top_level_calls(fn) -> Counter:
    """(aten op, input shapes) of the GEMM and reduction calls `fn` runs, as torch.profiler records them."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    return Counter((e.name, str(e.input_shapes)) for e in prof.events()
                   if e.name in ("aten::addmm", "aten::mm", "aten::sum"))


def _without_out(calls: Counter) -> Counter:
    """The calls with an out= operand dropped: the host benchmark writes the weight gradient and the bias sum into
    buffers of its own (the same aten call with its result tensor as one more operand)."""
    import ast

    operands = {"aten::mm": 2, "aten::sum": 4}
    return Counter({(name, str(ast.literal_eval(shapes)[:operands.get(name)])): n for (name, shapes), n in calls.items()})


def test_linear_passes_compute_what_autograd_computes():
    torch.manual_seed(0)
    layer = torch.nn.Linear(K, N)
    x = torch.randn(M, K, requires_grad=True)
    dy = torch.randn(M, N)
    y = layer(x)
    y.backward(dy)
    w, b = layer.weight.detach(), layer.bias.detach()
    assert torch.allclose(bc.linear_fwd(x.detach(), w, b), y.detach(), atol=1e-6)
    assert torch.allclose(bc.linear_bwd_data(dy, w), x.grad, atol=1e-6)
    dw, db = bc.linear_bwd_weight(dy, x.detach())
    assert torch.allclose(dw, layer.weight.grad, atol=1e-6)
    assert torch.allclose(db.reshape(-1), layer.bias.grad, atol=1e-6)


def test_linear_cases_run_autograds_calls_on_its_operand_layouts():
    """The benchmark runs addmm on W's transposed view, mm(dY, W) and mm(dY^T, X) plus the bias sum: the same
    aten calls with the same operand shapes as autograd on nn.Linear (a (N, M) operand of an (M, N) dY is its
    transposed view: no copy is made)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(K, N)
    x = torch.randn(M, K, requires_grad=True)
    dy = torch.randn(M, N)
    autograd = _top_level_calls(lambda: layer(x).backward(dy))
    cases = bc.linear_cases(M, N, K, "float32", "cpu")
    assert [(c.benchmark, c.variant, c.params) for c in cases] == \
        [("linear", v, {"M": M, "N": N, "K": K}) for v in ("fwd", "bwd_data", "bwd_weight")]
    calls = [case.build() for case in cases]
    bench = _without_out(_top_level_calls(lambda: [call() for call in calls]))
    assert bench == autograd
    assert {("aten::mm", str([[M, N], [N, K]])), ("aten::mm", str([[N, M], [M, K]]))} <= set(bench)
    fwd, bwd_data, bwd_weight = (call() for call in calls)
    assert fwd.shape == (M, N) and bwd_data.shape == (M, K)
    assert bwd_weight[0].shape == (N, K) and bwd_weight[1].shape == (1, N)
    assert all(c.flops == 2 * M * N * K for c in cases)


@pytest.mark.parametrize("quick", [True, False])
def test_cpu_grids_time_every_linear_pass_over_skinny_batches(quick):
    cases = [c for c in bc.plan_compute("cpu", quick) if c.benchmark == "linear"]
    shapes = {(c.params["M"], c.params["N"], c.params["K"]) for c in cases}
    assert Counter(c.variant for c in cases) == {v: len(shapes) for v in ("fwd", "bwd_data", "bwd_weight")}
    batches = {m for m, _, _ in shapes}
    assert min(batches) == 1 and max(batches) == 512 and len(batches) >= 8
    for features in ({n for _, n, _ in shapes}, {k for _, _, k in shapes}):
        assert min(features) <= 64 and max(features) >= 4096
    assert {m < min(n, k) for m, n, k in shapes} == {True, False}  # the batch on the small and the large side


def test_quick_cpu_grid_replaces_gemm_work_rather_than_adding_it():
    """The quick grid's GEMM-type work (plain GEMMs plus the three linear passes) stays below the 11.1 GFLOP
    its 16 GEMMs did before linear layers were measured, plus the 0.8 GFLOP of its one memory-bound head
    beyond the caches (8, 256, 65536), so the calibration keeps its length."""
    gemm_like = [c for c in bc.plan_compute("cpu", True) if c.benchmark in ("gemm", "linear")]
    assert sum(c.flops for c in gemm_like) < 11.1e9 + 3 * 2 * 8 * 256 * 65536
    assert max(c.flops for c in gemm_like if c.benchmark == "linear") <= 0.3e9


def test_gpu_grid_has_linear_passes_in_every_dtype():
    cases = [c for c in bc.plan_compute("cuda", True) if c.benchmark == "linear"]
    assert {c.dtype for c in cases} == set(bc.GPU_DTYPES)
    assert max(c.flops for c in cases) > 5e10  # full-size fully connected layers at large batches
    assert all(c.tags["matmul_allow_tf32"] == (c.dtype == "tf32") for c in cases)


# ------------------------------------------------------------------------------------------ fit and cost
GEMM_RATE = 50e9  # FLOP/s of forward GEMMs
#: a machine whose backward linear products run slower per FLOP than its forward GEMMs, as skinny transposed
#: products do (the backward-weight one reduces over the batch)
LINEAR_RATE = {"fwd": 50e9, "bwd_data": 25e9, "bwd_weight": 12.5e9}
LINEAR_GRID = [dict(M=m, N=n, K=k) for m in (1, 16, 512) for n in (10, 1024) for k in (256, 4096)]


def _profile(with_linear: bool):
    rng = np.random.default_rng(3)
    gemms = [dict(M=m, N=n, K=k) for m in (64, 512, 4096) for n in (64, 1024) for k in (128, 2048)]
    samples = conv_samples(gemms, lambda flops, _: 5e-6 + flops / GEMM_RATE, rng, op="gemm", noise=0.01)
    samples += stream_samples([2.0**k for k in range(14, 28)], lambda s: 1e-6 + s / 20e9, rng)
    if with_linear:
        for pass_, rate in LINEAR_RATE.items():
            samples += conv_samples(LINEAR_GRID, lambda flops, _, r=rate: 5e-6 + flops / r, rng, op="linear",
                                    pass_=pass_, noise=0.01)
    return load_cost_model(fit_profile(profile_with(samples)))


@pytest.fixture(scope="module")
def linear_cm():
    return _profile(with_linear=True)


@pytest.fixture(scope="module")
def gemm_cm():
    return _profile(with_linear=False)


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_fit_makes_a_family_per_linear_pass(linear_cm):
    compute = linear_cm.coefficients.compute
    assert {"linear/fwd/float32", "linear/bwd_data/float32", "linear/bwd_weight/float32"} <= set(compute)
    assert compute["linear/bwd_weight/float32"].n_samples == len(LINEAR_GRID)


@pytest.mark.slow  # fits two CPU profiles (the module fixture)
@pytest.mark.parametrize("pass_", ["bwd_data", "bwd_weight"])
def test_cost_model_uses_the_linear_families(linear_cm, gemm_cm, pass_):
    shape = dict(M=32, N=1000, K=2048)  # not a grid shape: the fit answers
    truth = 5e-6 + 2 * 32 * 1000 * 2048 / LINEAR_RATE[pass_]
    assert linear_cm.compute_time_s("linear", pass_, shape, "fp32") == pytest.approx(truth, rel=0.2)
    # a profile without linear families keeps the stated substitution: the forward GEMM of the pass
    as_gemm = gemm_cm.compute_time_s("gemm", "fwd", gemm_backward_as_forward(pass_, shape), "fp32")
    assert gemm_cm.compute_time_s("linear", pass_, shape, "fp32") == pytest.approx(as_gemm)
    assert linear_cm.compute_time_s("linear", pass_, shape, "fp32") > 1.5 * as_gemm


@pytest.mark.slow  # fits two CPU profiles (the module fixture)
def test_a_measured_forward_gemm_does_not_stand_in_for_a_linear_pass(linear_cm):
    """The grid's GEMM (64, 1024, 2048) is the forward-GEMM form of the linear bwd_data call (64, 2048, 1024);
    with linear families in the profile, that call is costed by its own family, not by the measured GEMM."""
    shape = dict(M=64, N=2048, K=1024)
    gemm_s = linear_cm.compute_time_s("gemm", "fwd", gemm_backward_as_forward("bwd_data", shape), "fp32")
    linear_s = linear_cm.compute_time_s("linear", "bwd_data", shape, "fp32")
    assert linear_s == pytest.approx(5e-6 + 2 * 64 * 2048 * 1024 / LINEAR_RATE["bwd_data"], rel=0.2)
    assert linear_s > 1.5 * gemm_s
    measured = dict(M=16, N=1024, K=4096)  # a linear grid shape: its own measured time
    assert linear_cm.compute_time_s("linear", "bwd_weight", measured, "fp32") == pytest.approx(
        5e-6 + 2 * 16 * 1024 * 4096 / LINEAR_RATE["bwd_weight"], rel=0.05)


@pytest.mark.slow  # fits two CPU profiles (the module fixture)
def test_predictor_costs_linear_layers_by_their_families(linear_cm, gemm_cm):
    graph = trace_module(torch.nn.Sequential(torch.nn.Linear(2048, 1024), torch.nn.Linear(1024, 10)), (2048,), "mlp")
    batch = 32
    with_linear, = predict_all(graph, batch, 1, linear_cm, strategies=("serial",), interval=False)
    as_gemm, = predict_all(graph, batch, 1, gemm_cm, strategies=("serial",), interval=False)
    # the first layer needs no input gradient: its backward is backward-weight only
    passes = [("bwd_weight", dict(M=batch, N=1024, K=2048)), ("bwd_data", dict(M=batch, N=10, K=1024)),
              ("bwd_weight", dict(M=batch, N=10, K=1024))]
    truth = sum(5e-6 + 2 * p["M"] * p["N"] * p["K"] / LINEAR_RATE[pass_] for pass_, p in passes)
    assert with_linear.compute_bwd_s == pytest.approx(truth, rel=0.2)
    assert with_linear.compute_bwd_s > 2 * as_gemm.compute_bwd_s
    assert with_linear.compute_fwd_s == pytest.approx(as_gemm.compute_fwd_s, rel=0.2)  # same forward speed
