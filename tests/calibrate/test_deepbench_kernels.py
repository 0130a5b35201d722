"""The DeepBench kernel models shipped as data (calibrate.deepbench_kernels): labels, exclusions, retargeting."""
from __future__ import annotations

import pytest

from calibrate import deepbench_kernels as dk
from calibrate import gpu_specs
from profiler.errors import UserError

V100 = dk.DATA / "deepbench" / "DeepBench_NV_V100.xlsx"
P100 = dk.DATA / "deepbench" / "DeepBench_NV_P100.xlsx"


@pytest.fixture(scope="module")
def labelled():
    return {path.name: (samples, run) for path, samples, run in dk.read_labelled([V100, P100])}


def test_applications_come_from_any_file_that_names_them(labelled):
    v100, _ = labelled[V100.name]
    p100, run = labelled[P100.name]
    assert run.gpu and "P100" in run.gpu
    # the P100 workbook names no application; the V100 one names them for the same shape list
    kernel_rows = [s for s in p100 if s.benchmark in ("gemm", "conv2d")]
    assert kernel_rows and all(s.extra.get("application") for s in kernel_rows)
    named = {dk._shape_key(s): s.extra["application"] for s in v100 if s.benchmark in ("gemm", "conv2d")}
    agree = [named[dk._shape_key(s)] == s.extra["application"] for s in kernel_rows if dk._shape_key(s) in named]
    assert len(agree) > 500 and all(agree)


def test_a_workbook_alone_takes_its_labels_from_the_carried_workbooks():
    """Given alone, the P100 workbook (which names no application) has none; with the carried workbooks' labels
    (the V100's among them) its shapes are labelled and only its own samples are returned (the
    leave-one-application-out figures of any DeepBench file: bench.deepbench asks for them)."""
    alone = dk.read_labelled([P100])
    assert len(alone) == 1
    kernel_rows = [s for s in alone[0][1] if s.benchmark in ("gemm", "conv2d")]
    assert kernel_rows and not any(s.extra.get("application") for s in kernel_rows)
    with_labels = dk.read_labelled([P100], carried=True)
    assert [path.name for path, _, _ in with_labels] == [P100.name]
    labelled_rows = [s for s in with_labels[0][1] if s.benchmark in ("gemm", "conv2d")]
    assert len(labelled_rows) == len(kernel_rows) and all(s.extra.get("application") for s in labelled_rows)


def test_input_layer_backward_data_is_left_out(labelled):
    for samples, _ in labelled.values():
        assert not any(dk.input_layer_backward_data(s) for s in samples)
    # the P100 sheet times them (DeepBench's V100 sheet does not): read_labelled drops them
    p100, _ = labelled[P100.name]
    assert any(s.benchmark == "conv2d" and s.variant == "fwd" and int(s.params["C"]) < dk.INPUT_LAYER_CHANNELS
               for s in p100)


def test_shipped_models_cover_every_workbook_gpu():
    models = dk.load_kernels()
    for path in dk.WORKBOOKS:
        gpu = dk.read_labelled([path])[0][2].gpu
        spec = gpu_specs.find_spec(gpu)
        assert spec is not None and spec.name in models, gpu
        assert set(models[spec.name].modes) >= {"float32"}
    assert set(models["Tesla V100-SXM2"].modes) == {"float32", "float16"}
    assert models["Tesla V100-SXM2"].modes["float16"].tensor_cores
    assert not models["Tesla P100-PCIE-16GB"].modes["float16"].tensor_cores  # FP16 storage, FP32 math


def test_kernels_for_scales_the_peaks_to_another_clock_of_the_same_chip():
    base = dk.kernels_for("Tesla P100-SXM2-16GB")
    spec = gpu_specs.find_spec("Tesla P100-SXM2-16GB")
    scaled = dk.kernels_for("Tesla P100-SXM2-16GB", 10.6e12)
    factor = 10.6e12 / spec.peak_flops_per_s["float32"]
    for dtype, mode in base.modes.items():
        assert scaled.modes[dtype].peak_flops_per_s == pytest.approx(mode.peak_flops_per_s * factor)
        assert scaled.modes[dtype].values == mode.values  # the fitted constants are the chip's
    assert scaled.memory_bytes_per_s == base.memory_bytes_per_s
    assert dk.kernels_for("NVIDIA A100-SXM4-80GB") is None  # DeepBench timed no A100
    assert dk.kernels_for("Radeon Instinct MI250") is None


def test_a_malformed_kernel_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "k.yaml"
    bad.write_text("Tesla V100-SXM2: {gpu: V100, sms: 0, memory_bytes_per_s: 9e11, modes: {}}\n")
    with pytest.raises(UserError, match="k.yaml: field"):
        dk.load_kernels(bad)
    bad.write_text("- a list\n")
    with pytest.raises(UserError, match="mapping"):
        dk.load_kernels(bad)


def test_grouped_convolutions_take_the_profiles_grouped_family_over_the_kernel_model():
    """The kernel model is fitted to GEMMs and dense convolutions: a profile that carries both it and a grouped
    family costs a depthwise call with the family (here the datasheet's share of the triad) and a dense call with
    the kernel model; without the grouped family the kernel model costs the depthwise call too."""
    from calibrate import gpu_kernels
    from calibrate.cost_model import load_cost_model
    from calibrate.published import NODES, build_profile

    node = next(n for n in NODES if n.file == "v100-dgx1-8gpu.published.yaml")
    kernels = dk.kernels_for(node.gpu.name, node.gpu.peak_flops["float32"].value)
    both = build_profile(node, None, kernels=kernels)
    dense = {"N": 32, "C": 64, "H": 56, "W": 56, "F": 64, "kernel": 3, "stride": 1, "padding": 1}
    depthwise = dict(dense, groups=64)
    datasheet = load_cost_model(build_profile(node, None))
    model = load_cost_model(both)
    mode = kernels.modes["float32"]
    hardware = gpu_kernels.Hardware(kernels.sms, mode.peak_flops_per_s, mode.fallback_flops_per_s,
                                    kernels.memory_bytes_per_s, mode.tensor_cores)
    for pass_ in ("fwd", "bwd_data", "bwd_weight"):
        assert model.compute_time_s("conv2d", pass_, depthwise, "float32") == pytest.approx(
            datasheet.compute_time_s("conv2d", pass_, depthwise, "float32"))
        assert model.compute_time_s("conv2d", pass_, dense, "float32") == pytest.approx(
            gpu_kernels.kernel_time_s(mode.values, hardware, "conv2d", pass_, dense, "float32"))
    compute = {k: v for k, v in both.coefficients["compute"].items() if not k.startswith("conv2d_grouped/")}
    bare = both.model_copy(update={"coefficients": {**both.coefficients, "compute": compute}})
    assert load_cost_model(bare).compute_time_s("conv2d", "fwd", depthwise, "float32") == pytest.approx(
        gpu_kernels.kernel_time_s(mode.values, hardware, "conv2d", "fwd", depthwise, "float32"))
