"""The kernel models fitted to shipped measured GPU calibrations, and the 3-D convolution model a published GPU borrows
(calibrate.measured_kernels)."""
from __future__ import annotations

import pytest

from calibrate import gpu_kernels as gk
from calibrate import measured_kernels as mk
from calibrate.coefficients import GpuKernelMode, GpuKernels
from calibrate.cost_model import cost_model_from_profile
from calibrate.published import build_profile
from calibrate.systems import load_nodes
from profiler.errors import UserError

VALUES = {name: p.prior for name, p in gk.PARAMS.items()}


def model(gpu="H200", sms=132, tensor_cores=True) -> GpuKernels:
    mode = GpuKernelMode(math="bfloat16_tensor" if tensor_cores else "float32", tensor_cores=tensor_cores,
                         peak_flops_per_s=989.4e12 if tensor_cores else 66.9e12, fallback_flops_per_s=66.9e12,
                         values=VALUES, samples=10)
    return GpuKernels(gpu=gpu, sms=sms, memory_bytes_per_s=4.8e12, modes={"bfloat16": mode}, sources=["s"])


def test_retarget_keeps_the_constants_and_takes_the_gpus_hardware():
    """By hand: the H200's constants on an A100 at its datasheet clock: 108 SMs, 312 TFLOP/s BF16, 19.5 TFLOP/s
    FP32, 1555 GB/s; at 90% of that clock every peak scaled by 0.9; only the named ops costed."""
    a100 = mk.retarget(model(), "NVIDIA A100-SXM4-40GB", 19.5e12, ["conv3d"])
    mode = a100.modes["bfloat16"]
    assert (a100.gpu, a100.sms, a100.memory_bytes_per_s, a100.ops) == ("A100-SXM4", 108, 1555e9, ["conv3d"])
    assert (mode.peak_flops_per_s, mode.fallback_flops_per_s, mode.tensor_cores) == (312e12, 19.5e12, True)
    assert mode.values == VALUES
    slow = mk.retarget(model(), "A100", 0.9 * 19.5e12, ["conv3d"]).modes["bfloat16"]
    assert slow.peak_flops_per_s == pytest.approx(0.9 * 312e12)
    # a mode whose tensor-core use differs on the target is dropped (a V100 runs BF16 without tensor cores)
    with pytest.raises(UserError, match="no dtype of H200's kernel model runs on the same units on the Tesla V100"):
        mk.retarget(model(), "Tesla V100-SXM2-16GB", 15.7e12, ["conv3d"])
    both = model().model_copy(update={"modes": {**model().modes, "float32": model(tensor_cores=False).modes["bfloat16"]}})
    assert list(mk.retarget(both, "Tesla V100-SXM2-16GB", 15.7e12, ["conv3d"]).modes) == ["float32"]
    with pytest.raises(UserError, match="not in calibrate/data/gpus.yaml"):
        mk.retarget(model(), "Imaginary GPU", 1e12, ["conv3d"])


def test_conv3d_kernels_names_its_source_or_fails_clearly():
    assert mk.conv3d_kernels(None, "NVIDIA A100-SXM4-40GB", 19.5e12) is None
    with pytest.raises(UserError, match="conv3d_kernels: no fitted kernel model of 'Tesla K80'"):
        mk.conv3d_kernels("Tesla K80", "NVIDIA A100-SXM4-40GB", 19.5e12)
    shipped = mk.conv3d_kernels("H200", "NVIDIA H100 80GB HBM3", 66.9e12)
    assert shipped.ops == ["conv3d"] and shipped.sms == 132 and shipped.memory_bytes_per_s == 3352e9
    # the shipped H200 fit names its 3-D families' held-out accuracy (the shapes' networks held out in turn)
    held = shipped.modes["bfloat16"].held_out_median_accuracy
    assert {"conv3d/fwd", "conv3d/bwd_data", "conv3d/bwd_weight"} <= set(held)


def test_a_published_profile_costs_its_3d_convolutions_with_the_borrowed_model_only():
    """An A100 profile's 3-D convolution is the H200 kernel model's time on the A100's hardware; its 2-D
    convolutions, GEMMs and linear layers keep the published families (the borrowed model costs conv3d only)."""
    node = next(n for n in load_nodes() if n.file == "a100-80gb-dgx-8gpu.published.yaml")
    profile = build_profile(node)
    cm = cost_model_from_profile(profile)
    record = cm.coefficients.gpu_kernels
    assert record.ops == ["conv3d"] and record.gpu == "A100-SXM4-80GB"
    layer = {"N": 1, "C": 4, "D": 32, "H": 32, "W": 32, "F": 32, "kernel": 3, "stride": 1, "padding": 1}
    mode = record.modes["float16"]
    hw = gk.Hardware(record.sms, mode.peak_flops_per_s, mode.fallback_flops_per_s, record.memory_bytes_per_s,
                     mode.tensor_cores)
    for pass_ in gk.PASSES:
        assert cm.compute_time_s("conv3d", pass_, layer, "float16") == pytest.approx(
            gk.kernel_time_s(mode.values, hw, "conv3d", pass_, layer, "float16", cm.conv_algorithm_search))
    flat = {"N": 8, "C": 64, "H": 56, "W": 56, "F": 64, "kernel": 3, "stride": 1, "padding": 1}
    bare = cost_model_from_profile(profile.model_copy(update={"coefficients": {
        k: v for k, v in profile.coefficients.items() if k != "gpu_kernels"}}))
    for op, params in (("conv2d", flat), ("gemm", {"M": 1024, "N": 1024, "K": 1024}),
                       ("linear", {"M": 64, "N": 128, "K": 256})):
        assert cm.compute_time_s(op, "fwd", params, "float16") == bare.compute_time_s(op, "fwd", params, "float16")


def test_a_measured_profile_without_a_gpu_or_kernel_samples_is_a_one_line_error(tmp_path):
    from profiler.profile import SCHEMA_VERSION, GPUInfo, Machine, Profile, Provenance, Sample, dump_yaml

    def write(gpus, samples):
        profile = Profile(schema_version=SCHEMA_VERSION, machine=Machine(hostname="n", cpu_cores=2, gpus=gpus),
                          provenance=Provenance(kind="calibrated", source="test"), created="2026-12-06T00:00:00+00:00",
                          samples=samples)
        path = tmp_path / "p.yaml"
        path.write_text(dump_yaml(profile.model_dump(mode="json", exclude_none=True)))
        return path

    relu = Sample(benchmark="relu", variant="fwd", params={"size": 8}, device="cuda", threads=1, times_s=[1e-5])
    with pytest.raises(UserError, match="p.yaml: a measured GPU profile names its GPU"):
        mk.fit_profiles([write([], [relu])])
    with pytest.raises(UserError, match="p.yaml: no GEMM or convolution sample"):
        mk.fit_profiles([write([GPUInfo(name="NVIDIA H200", memory_bytes=1e11)], [relu])])


def test_the_shipped_measured_models_are_the_shipped_profiles_own():
    """calibrate/data/measured_kernels.yaml is derived from the shipped calibrated profiles (python -m
    calibrate.measured_kernels): each model's constants are the ones its profile carries (`profiler fit`)."""
    from profiler.profile import load_profile

    models = mk.load_kernels(mk.KERNELS_FILE)
    assert mk.PROFILES
    for path in mk.PROFILES:
        carried = GpuKernels.model_validate(load_profile(path).coefficients["gpu_kernels"])
        shipped = models[carried.gpu]
        assert {d: m.values for d, m in shipped.modes.items()} == {d: m.values for d, m in carried.modes.items()}


def test_a_model_without_3d_samples_takes_the_measured_3d_ratios():
    """DeepBench times no 3-D convolution: the V100's borrowed model keeps its own DeepBench constants and takes the
    3-D regime's ratios from the H200's measured fit, dtype by dtype (THREE_D_PRIOR); the H200's own is unchanged."""
    from calibrate.deepbench_kernels import load_kernels as deepbench

    v100 = mk.conv3d_kernels("Tesla V100-SXM2", "Tesla V100-SXM2-16GB", 15.7e12)
    own = deepbench()["Tesla V100-SXM2"]
    h200 = mk.load_kernels(mk.KERNELS_FILE)["H200"]
    _, names = mk.THREE_D_PRIOR
    for dtype, mode in v100.modes.items():
        assert {n: mode.values[n] for n in names} == {n: h200.modes[dtype].values[n] for n in names}
        rest = {k: v for k, v in mode.values.items() if k not in names}
        assert rest == {k: v for k, v in own.modes[dtype].values.items() if k not in names}
    assert v100.modes["float32"].values["conv3d_bwd_weight"] < 0.5  # FP32 3-D weight gradients: the slow regime
    assert {n: own.modes["float32"].values[n] for n in names} == {n: 1.0 for n in names}  # DeepBench: no 3-D sample
    # a P100's FP16 storage with FP32 math runs CUDA-core kernels: it takes the FP32 ratios
    p100 = mk.conv3d_kernels("Tesla P100", "Tesla P100-SXM2-16GB", 10.6e12)
    assert p100.modes["float16"].values["conv3d_bwd_weight"] == h200.modes["float32"].values["conv3d_bwd_weight"]
    h100 = mk.conv3d_kernels("H200", "NVIDIA H100 80GB HBM3", 66.9e12)
    assert h100.modes["bfloat16"].values == h200.modes["bfloat16"].values
