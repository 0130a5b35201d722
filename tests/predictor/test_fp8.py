"""Plan dtype fp8 (Transformer Engine's recipe): linear layers' matrix products on the profile's float8 fits with
their casts, everything else bf16; saved tensors only linear layers keep in FP8; model state as bf16 mixed precision;
a profile without float8 fits is refused naming --dtype."""
from __future__ import annotations

import json

import pytest

from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profiles_dir
from predictor.api import load_model, predict
from predictor.cli import main
from predictor.layercost import (FP8_CAST_BYTES_PER_ELEM, FP8_WEIGHT_CAST_BYTES_PER_PARAM, LayerCoster, Split,
                                 check_dtype)
from predictor.memory import saved_tensors
from predictor.plan import Plan
from profiler.errors import UserError
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

H100 = shipped_profiles_dir() / "h100-dgx-8gpu.published.yaml"
V100 = shipped_profiles_dir() / "v100-dgx1-8gpu.published.yaml"
B, K, N = 64, 2048, 4096


@pytest.fixture(scope="module")
def h100():
    return kernels_only(load_cost_model(H100))


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    spec = tmp_path_factory.mktemp("fp8") / "mlp.json"
    spec.write_text(json.dumps({"name": "mlp", "input": [K], "layers": [
        {"name": "fc1", "op": "linear", "out": N}, {"name": "relu1", "op": "relu"},
        {"name": "fc2", "op": "linear", "out": 10}]}))
    return load_model(str(spec))


def test_linear_layer_costs_by_hand(h100, mlp):
    """fc2 (its input needs a gradient): forward = FP8 GEMM + cast of the input (4 B/elem: bf16 read, FP8 and
    its transpose written) and of the weight (6 B/param); backward = both FP8 backward GEMMs + cast of the output
    gradient; the ReLU between them runs in bf16."""
    fp8, bf16 = LayerCoster(mlp, h100, "fp8"), LayerCoster(mlp, h100, "bf16")
    i = next(j for j, l in enumerate(mlp.layers) if l.name == "fc2")
    params = {"M": B, "N": 10, "K": N}
    over_f, over_b = h100.framework_overhead_s("fwd"), h100.framework_overhead_s("bwd")
    gemm = lambda p, d: h100.compute_time_s("linear", p, params, d)
    fwd, bwd = fp8.times(i, Split(n=B))
    assert fwd == pytest.approx(gemm("fwd", "float8") + over_f + h100.memory_time_s(
        FP8_CAST_BYTES_PER_ELEM * B * N + FP8_WEIGHT_CAST_BYTES_PER_PARAM * N * 10))
    assert bwd == pytest.approx(gemm("bwd_data", "float8") + gemm("bwd_weight", "float8") + over_b
                                + h100.memory_time_s(FP8_CAST_BYTES_PER_ELEM * B * 10))
    assert gemm("fwd", "float8") < gemm("fwd", "bfloat16")  # twice the tensor-core peak
    relu = next(j for j, l in enumerate(mlp.layers) if l.op == "relu")
    assert fp8.times(relu, Split(n=B)) == pytest.approx(bf16.times(relu, Split(n=B)))


def test_saved_tensors_only_linear_layers_keep_are_fp8(mlp):
    """fc1's input (the model input) and the ReLU's output feed only linear layers: 1 byte per element under fp8
    (2 under bf16); the ReLU saves its own output too, so that one stays 2 bytes."""
    by_producer = {t.producer: t for t in saved_tensors(mlp) if t.bytes_per_elem is None}
    first = by_producer[-1]
    assert first.linear_only and first.size_bytes("fp8") == K and first.size_bytes("bf16") == 2 * K
    relu = next(j for j, l in enumerate(mlp.layers) if l.op == "relu")
    shared = by_producer[relu]
    assert not shared.linear_only and shared.size_bytes("fp8") == shared.size_bytes("bf16") == 2 * N


def test_fp8_plan_keeps_bf16_model_state_and_runs_faster_on_h100(h100):
    graph = load_model("gpt", layers=2, hidden=2048, heads=16, seq=1024, vocab=8192)
    preds = {d: predict(graph, Plan("data", batch=8, devices=8, devices_per_node=8, p_data=8, dtype=d,
                                    optimizer="adam"), h100, interval=False) for d in ("bf16", "fp8")}
    assert all(p.feasible for p in preds.values())
    for term in ("weights_bytes", "grads_bytes", "optimizer_bytes"):
        assert getattr(preds["fp8"], term) == getattr(preds["bf16"], term)
    assert preds["fp8"].activations_bytes < preds["bf16"].activations_bytes
    assert preds["fp8"].compute_fwd_s + preds["fp8"].compute_bwd_s < preds["bf16"].compute_fwd_s + preds["bf16"].compute_bwd_s


def test_a_profile_without_float8_is_refused(h100, capsys):
    check_dtype(h100, "fp8", "h100")
    check_dtype(load_cost_model(V100), "bf16", "v100")
    with pytest.raises(UserError, match="--dtype fp8"):
        check_dtype(load_cost_model(V100), "fp8", "v100")
    assert main(["run", "--model", "gpt", "--batch", "8", "--gpus", "1", "--dtype", "fp8", "--profile",
                 "v100-dgx1-8gpu.published"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dtype fp8" in err[0] and "float8" in err[0]


def test_measured_float8_linear_samples_fit_their_own_families():
    """What a GPU calibration measures for FP8 (profiler.bench_compute.fp8_linear_cases) becomes the linear/*/float8
    families the fp8 plans read."""
    from calibrate import backends
    from calibrate.fit import _fit_family, compute_points
    from profiler.profile import Sample

    samples = [Sample(benchmark="linear", variant=v, dtype="float8", device="cuda:0",
                      params={"M": m, "N": 1024, "K": 1024}, times_s=[2e-6 + 2 * m * 1024 * 1024 / 1e15], threads=1)
               for v in ("fwd", "bwd_data", "bwd_weight") for m in (64, 128, 256, 512, 1024, 2048, 4096, 8192)]
    points = compute_points(samples)
    assert sorted(points) == ["linear/bwd_data/float8", "linear/bwd_weight/float8", "linear/fwd/float8"]
    fit = _fit_family("linear/fwd/float8", points["linear/fwd/float8"], 3e12, 0, ("trees",), backends.GpuBackend())
    assert fit.kind == "flops" and fit.n_samples == 8 and fit.peak_per_s == pytest.approx(1e15, rel=0.1)
