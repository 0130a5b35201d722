"""GPU kernel models fitted to the measured GPU calibrations the repository ships, and the 3-D convolution model a
published GPU borrows from a measured one (docs/gpu-kernels.md, "3-D convolutions").

    python -m calibrate.measured_kernels      # refit, rewrite calibrate/data/measured_kernels.yaml

DeepBench times no 3-D convolution; the H200 calibration (calibrate/profiles/h200.yaml, `profiler calibrate --device
cuda`) times 20 per pass and dtype beside its 2-D ones. A published profile costs its 3-D convolutions with the kernel
model its GPU's `conv3d_kernels` names (calibrate/data/published/gpus.yaml): its own chip's DeepBench fit where
DeepBench timed the chip, otherwise a measured GPU's constants on this GPU's SMs, peaks and DRAM bandwidth
(`retarget`: the constants describe the libraries' kernels, the hardware scales them, as Habitat scales a kernel's
waves from one GPU to another).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from calibrate import gpu_specs
from calibrate.coefficients import GpuKernels
from calibrate.deepbench_kernels import KERNELS_FILE as DEEPBENCH_FILE
from calibrate.deepbench_kernels import load_kernels, write_kernels_main
from calibrate.gpu_kernel_fit import fit_gpu_kernels
from profiler.errors import UserError
from profiler.profile import load_profile

ROOT = Path(__file__).resolve().parent
#: the shipped measured GPU calibrations whose samples the models are fitted to: every shipped profile that is not a
#: published one (calibrate/profiles/h200.yaml today; a GPU session's profile once copied there, docs/gpu.md)
PROFILES = tuple(p for p in sorted((ROOT / "profiles").glob("*.yaml")) if not p.name.endswith(".published.yaml"))
KERNELS_FILE = ROOT / "data" / "measured_kernels.yaml"
#: the fit whose padded-channel shares centre the priors of a calibration's tensor-core fits: the one GPU whose large
#: unaligned convolutions were timed (DeepBench's V100 FP16 first layers, 224^2 ResNet and 161 x 700 DeepSpeech); a
#: calibration's small unaligned samples leave these shares unpinned (docs/decisions/2026-12-06-conv3d-kernel-model.md)
PADDING_PRIOR = ("Tesla V100-SXM2", "float16", ("unaligned_ratio", "unaligned_bwd_ratio"))


#: the measured fit whose 3-D regime ratios (cuDNN's 3-D kernels against its 2-D ones, per pass) stand in where a model
#: was fitted without 3-D samples (DeepBench's): the one GPU that timed both. FP32 3-D weight gradients at a fifth of
#: the 2-D rate there; pytorch/pytorch#32370 (cuDNN 7, 2020: a 3-D backward 7-15x the forward) and #22961 (cuDNN 7.4's
#: convolveNd_wgrad_engine<float, 3> taking 70% of a step) report the same regime in the V100's cuDNN generation
THREE_D_PRIOR = ("H200", ("conv3d_fwd", "conv3d_bwd_data", "conv3d_bwd_weight"))


def with_measured_3d(model: GpuKernels) -> GpuKernels:
    """A model fitted without 3-D samples with THREE_D_PRIOR's 3-D ratios: a tensor-core mode its dtype's, a CUDA-core
    mode (FP32, or a P100's FP16 storage with FP32 math) FP32's; a dtype the measured fit lacks keeps its prior 1."""
    gpu, names = THREE_D_PRIOR
    measured = load_kernels(KERNELS_FILE)[gpu]
    modes = {}
    for dtype, mode in model.modes.items():
        source = measured.modes.get(dtype if mode.tensor_cores else "float32")
        modes[dtype] = mode if source is None else mode.model_copy(
            update={"values": {**mode.values, **{n: source.values[n] for n in names}}})
    return model.model_copy(update={"modes": modes, "sources": model.sources + [
        f"3-D regime ratios from {gpu}'s measured fit (no 3-D sample in this model's; THREE_D_PRIOR)"]})


def padding_centres() -> dict[str, float]:
    gpu, dtype, names = PADDING_PRIOR
    values = load_kernels(DEEPBENCH_FILE)[gpu].modes[dtype].values
    return {name: values[name] for name in names}


def fit_profiles(paths: Sequence[Path] = PROFILES) -> dict[str, GpuKernels]:
    """GPU (its calibrate/data/gpus.yaml name) -> the kernel model fitted to a measured profile's GPU samples."""
    out = {}
    for path in paths:
        profile = load_profile(path)
        if not profile.machine.gpus:
            raise UserError(f"{path}: a measured GPU profile names its GPU (machine.gpus)")
        gpu = profile.machine.gpus[0]
        kernels = fit_gpu_kernels(profile.samples, gpu.name, tensor_core_centres=padding_centres())
        if kernels is None:
            raise UserError(f"{path}: no GEMM or convolution sample of a GPU in calibrate/data/gpus.yaml")
        out[kernels.gpu] = kernels.model_copy(update={"sources": kernels.sources + [
            f"measured on one {gpu.name} by `profiler calibrate --device cuda` ({path.name}, {profile.created[:10]}), "
            "the shapes' networks held out in turn for the held-out figures",
            "the tensor-core fits' padded-channel shares centred on DeepBench's V100 FP16 fit (PADDING_PRIOR)"]})
    return out


def retarget(kernels: GpuKernels, gpu_name: str, float32_peak_flops_per_s: float, ops: Sequence[str]) -> GpuKernels:
    """`kernels`' constants on another GPU: its SMs, DRAM bandwidth and the peaks of each dtype's math mode there,
    scaled by this card's FP32 peak over its chip's datasheet one (another clock of the same silicon); the modes whose
    tensor-core use differs there are dropped (an error when none is left); costing only `ops`."""
    spec = gpu_specs.find_spec(gpu_name)
    if spec is None:
        raise UserError(f"GPU {gpu_name!r} is not in calibrate/data/gpus.yaml")
    factor = float32_peak_flops_per_s / spec.peak_flops_per_s["float32"]
    modes = {}
    for dtype, mode in kernels.modes.items():
        math_name, tensor_cores = gpu_specs.math_mode(spec, dtype, mode.math)
        if tensor_cores != mode.tensor_cores:
            continue
        hw = gpu_specs.split_math(spec, dtype, mode.math)[0]
        modes[dtype] = mode.model_copy(update={"math": math_name, "peak_flops_per_s": hw.peak_flops_per_s * factor,
                                               "fallback_flops_per_s": hw.fallback_flops_per_s * factor})
    if not modes:
        raise UserError(f"no dtype of {kernels.gpu}'s kernel model runs on the same units on the {spec.name}")
    same = spec.name == kernels.gpu
    note = (f"{kernels.gpu}'s kernel constants" + ("" if same else f" on the {spec.name}'s {spec.sms} SMs, peaks "
                                                                    "and DRAM bandwidth")
            + f", peaks scaled by {factor:.3f} (this card's FP32 peak over the datasheet's); costs {', '.join(ops)}")
    return GpuKernels(gpu=spec.name, sms=spec.sms, memory_bytes_per_s=spec.memory_bytes_per_s, search=kernels.search,
                      modes=modes, ops=list(ops), sources=kernels.sources + [note, spec.source])


def conv3d_kernels(source_gpu: Optional[str], gpu_name: str, float32_peak_flops_per_s: float
                   ) -> Optional[GpuKernels]:
    """The model that costs a published GPU's 3-D convolutions: `source_gpu`'s (its `conv3d_kernels`) on this GPU;
    None without one."""
    if source_gpu is None:
        return None
    spec = gpu_specs.find_spec(source_gpu)
    measured = load_kernels(KERNELS_FILE).get(spec.name) if spec else None
    model = measured or (load_kernels(DEEPBENCH_FILE).get(spec.name) if spec else None)
    if model is None:
        raise UserError(f"conv3d_kernels: no fitted kernel model of {source_gpu!r} ({KERNELS_FILE.name}, "
                        f"{DEEPBENCH_FILE.name})")
    if measured is None:  # DeepBench times no 3-D convolution
        model = with_measured_3d(model)
    return retarget(model, gpu_name, float32_peak_flops_per_s, ["conv3d"])


def main(argv=None) -> int:
    return write_kernels_main(argv, __doc__.splitlines()[0], KERNELS_FILE, fit_profiles, (
        "# GPU kernel models fitted to the shipped measured GPU calibrations: `python -m calibrate.measured_kernels`\n"
        "# writes this file from calibrate/profiles; do not edit by hand.\n"))


if __name__ == "__main__":
    raise SystemExit(main())
