"""GPU datasheet figures (calibrate/data/gpus.yaml) and the math mode each dtype runs in, for the GPU kernel model.

A dtype's math mode decides its peak: float32 on CUDA cores; tf32, float16 and bfloat16 on tensor cores where the
GPU has them; float16 on a GPU without them at its half-precision CUDA-core rate, or at the float32 rate when the
kernels store FP16 and compute in FP32 (DeepBench's P100 "pseudo FP16" sheet: math "fp16_storage_fp32_math").
A GPU the datasheet file does not list takes figures derived from what the device reports (SMs, clocks, compute
capability, memory bus: `derive_spec`, calibrate/data/gpu_architectures.yaml; docs/method.md §3b).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calibrate.gpu_kernels import Hardware
from profiler import inputs
from profiler.dtypes import canonical_dtype
from profiler.deepbench import FP16_STORAGE_FP32_MATH
from profiler.errors import UserError

SPECS_FILE = Path(__file__).resolve().parent / "data" / "gpus.yaml"
ARCHITECTURES_FILE = Path(__file__).resolve().parent / "data" / "gpu_architectures.yaml"


class GpuSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    names: list[str] = Field(min_length=1)
    sms: int = Field(ge=1)
    peak_flops_per_s: dict[str, float] = Field(min_length=1)
    memory_bytes_per_s: float = Field(gt=0)
    source: str


@functools.lru_cache(maxsize=None)
def load_specs(path: Path = SPECS_FILE) -> tuple[GpuSpec, ...]:
    data = inputs.read_yaml(path, "GPU specifications")
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise UserError(f"{path}: expected a mapping with a list 'gpus'")
    try:
        return tuple(GpuSpec.model_validate(entry) for entry in data["gpus"])
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"{path}: field {'.'.join(str(p) for p in e['loc'])}: {e['msg']}") from None


#: dtype -> the tensor-core math mode (peak_flops_per_s key) it runs in where a GPU has one
TENSOR_MODES = {"tf32": "tf32_tensor", "float16": "float16_tensor", "bfloat16": "bfloat16_tensor"}


def find_spec(gpu_name: str, path: Path = SPECS_FILE) -> Optional[GpuSpec]:
    """The datasheet entry whose longest name fragment occurs in gpu_name as whole words (case and spaces ignored:
    "1080ti" is in "GTX 1080 Ti"; "a10" is not in "A100" or "A10G", "v100" not in "Quadro GV100")."""
    text, gap = _words(gpu_name)
    matches = [(len(fragment), spec) for spec in load_specs(path) for fragment in spec.names
               if _names_words(text, gap, fragment)]
    return max(matches, key=lambda m: m[0])[1] if matches else None


def _words(name: str) -> tuple[str, list[bool]]:
    """A name lower-cased without its spaces, and whether a space preceded each of its characters."""
    chars, gap = [], []
    spaced = True
    for ch in name.lower():
        if ch.isspace():
            spaced = True
            continue
        chars.append(ch)
        gap.append(spaced)
        spaced = False
    return "".join(chars), gap


def _names_words(text: str, gap: list[bool], fragment: str) -> bool:
    """Whether `fragment` occurs in a name (`_words`), spaces ignored, not cut out of a longer run of letters and
    digits (a space in the name separates words even where the comparison ignores it)."""
    frag = fragment.lower().replace(" ", "")
    start = text.find(frag)
    while frag and start >= 0:
        end = start + len(frag)
        joined_before = start > 0 and not gap[start] and text[start - 1].isalnum() and text[start].isalnum()
        joined_after = end < len(text) and not gap[end] and text[end - 1].isalnum() and text[end].isalnum()
        if not (joined_before or joined_after):
            return True
        start = text.find(frag, start + 1)
    return False


class Architecture(BaseModel):
    """What one SM of an architecture computes per clock (calibrate/data/gpu_architectures.yaml)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    fp32_flops_per_clock_per_sm: float = Field(gt=0)
    tensor_flops_per_clock_per_sm: dict[str, float] = Field(default_factory=dict)
    float16_cuda_ratio: Optional[float] = Field(default=None, gt=0)
    geforce_tensor_share: float = Field(default=1.0, gt=0, le=1)
    tensor_clock_ratio: float = Field(default=1.0, gt=0, le=1)
    source: str


@functools.lru_cache(maxsize=None)
def load_architectures(path: Path = ARCHITECTURES_FILE) -> dict[str, Architecture]:
    data = inputs.read_yaml(path, "GPU architectures")
    if not isinstance(data, dict) or not isinstance(data.get("architectures"), dict):
        raise UserError(f"{path}: expected a mapping with a mapping 'architectures'")
    try:
        return {str(k): Architecture.model_validate(v) for k, v in data["architectures"].items()}
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"{path}: field {'.'.join(str(p) for p in e['loc'])}: {e['msg']}") from None


#: what derive_spec reads of a device record (profiler.profile.GPUInfo, NVML and torch facts)
DEVICE_FACTS = ("sms", "max_sm_clock_mhz", "compute_capability", "max_mem_clock_mhz", "memory_bus_width_bits")


def derive_spec(device) -> Optional[GpuSpec]:
    """Datasheet-like figures of a GPU the datasheet file does not list, from what the device reports
    (profiler.profile.GPUInfo): peaks = its architecture's FLOPs per clock per SM x SMs x maximum SM clock (a
    GeForce card's tensor rate times the architecture's GeForce share), DRAM bandwidth = 2 x maximum memory clock x
    bus width. None where a fact is missing or the compute capability is not in gpu_architectures.yaml."""
    facts = {k: getattr(device, k, None) for k in DEVICE_FACTS}
    arch = load_architectures().get(str(facts["compute_capability"] or ""))
    if arch is None or any(facts[k] is None for k in DEVICE_FACTS):
        return None
    sms, sm_hz = int(facts["sms"]), float(facts["max_sm_clock_mhz"]) * 1e6
    name = str(getattr(device, "name", "") or "unnamed GPU")
    share = arch.geforce_tensor_share if "geforce" in name.lower() else 1.0
    peaks = {"float32": arch.fp32_flops_per_clock_per_sm * sms * sm_hz}
    if arch.float16_cuda_ratio:
        peaks["float16_cuda"] = arch.float16_cuda_ratio * peaks["float32"]
    for mode, rate in arch.tensor_flops_per_clock_per_sm.items():
        peaks[mode] = rate * share * sms * sm_hz * arch.tensor_clock_ratio
    bandwidth = 2.0 * float(facts["max_mem_clock_mhz"]) * 1e6 * float(facts["memory_bus_width_bits"]) / 8.0
    source = (f"derived from the device (not in calibrate/data/gpus.yaml): {arch.name}, compute capability "
              f"{facts['compute_capability']}, {sms} SMs at {facts['max_sm_clock_mhz']:g} MHz, "
              f"{facts['memory_bus_width_bits']:g}-bit memory at {facts['max_mem_clock_mhz']:g} MHz; per-SM rates: "
              f"{arch.source}" + ("; GeForce: tensor rates x %g" % share if share != 1.0 else ""))
    return GpuSpec(name=name, names=[name.lower()], sms=sms, peak_flops_per_s=peaks, memory_bytes_per_s=bandwidth,
                   source=source)


def spec_for(gpu_name: str, device=None) -> Optional[GpuSpec]:
    """The datasheet entry of `gpu_name`, else figures derived from `device` (derive_spec), else None."""
    return find_spec(gpu_name) or (derive_spec(device) if device is not None else None)


def math_mode(spec: GpuSpec, dtype: str, math: Optional[str] = None) -> tuple[str, bool]:
    """(the peak_flops_per_s key a dtype runs at, whether on tensor cores) on this GPU."""
    dtype = canonical_dtype(dtype)
    peaks = spec.peak_flops_per_s
    if dtype == "float32" or math == FP16_STORAGE_FP32_MATH:
        return "float32", False
    tensor = TENSOR_MODES.get(dtype)
    if tensor in peaks:
        return tensor, True
    if dtype == "float16" and "float16_cuda" in peaks:
        return "float16_cuda", False
    return "float32", False  # TF32/BF16 without tensor cores run (or are emulated) at the float32 rate


def hardware(spec: GpuSpec, dtype: str, math: Optional[str] = None, sms: Optional[int] = None) -> Hardware:
    """The kernel model's Hardware for one dtype (sms: the measured count, where the device reports it)."""
    mode, tensor_cores = math_mode(spec, dtype, math)
    return Hardware(sms=int(sms or spec.sms), peak_flops_per_s=spec.peak_flops_per_s[mode],
                    fallback_flops_per_s=spec.peak_flops_per_s["float32"],
                    memory_bytes_per_s=spec.memory_bytes_per_s, tensor_cores=tensor_cores)


def split_math(spec: GpuSpec, dtype: str, math: Optional[str] = None, sms: Optional[int] = None
               ) -> tuple[Hardware, float]:
    """(the dtype's Hardware, a call of this math's peak over it). FP16 on a GPU with a half-precision CUDA-core
    rate and no tensor cores runs some calls in true half and others with FP32 arithmetic (FP16_STORAGE_FP32_MATH),
    by library and version: DeepBench's P100 sheet (code @7b75e76) ran cuBLAS with CUDA_R_32F compute and cuDNN in
    true half (a CUDNN_DATA_HALF convolution descriptor; its 1x1 convolutions reach 13.4 TFLOP/s on a 9.3 TFLOP/s
    FP32 P100), today's binaries the reverse (profiler.deepbench labels each row). Both run on the half peak's
    Hardware, an FP32-arithmetic call at FP32 / half of it; every other dtype and GPU: hardware() and 1.0
    (docs/method.md §3b)."""
    if canonical_dtype(dtype) != "float16" or "float16_cuda" not in spec.peak_flops_per_s \
            or math_mode(spec, dtype)[1]:
        return hardware(spec, dtype, math, sms), 1.0
    half = hardware(spec, dtype, None, sms)
    if math != FP16_STORAGE_FP32_MATH:
        return half, 1.0
    return half, hardware(spec, dtype, math, sms).peak_flops_per_s / half.peak_flops_per_s


def main(argv=None) -> int:
    """`python -m calibrate.gpu_specs`: each local GPU's datasheet entry beside the figures derived from what it
    reports (a lent GPU checks the derivation: docs/method.md §3b); prints nothing to compare without NVML."""
    import argparse

    from profiler.metadata import nvml_gpus, with_sm_counts

    argparse.ArgumentParser(prog="python -m calibrate.gpu_specs", description=main.__doc__).parse_args(argv)
    gpus = with_sm_counts(nvml_gpus()[0])  # NVML's facts with torch's SM counts, as a profile records them
    if not gpus:
        print("no GPU reported by NVML")
        return 0
    for index, gpu in enumerate(gpus):
        listed, derived = find_spec(gpu.name), derive_spec(gpu)
        print(f"GPU {index}: {gpu.name}; " + ", ".join(f"{k} {getattr(gpu, k, None)}" for k in DEVICE_FACTS))
        for label, spec in (("datasheet", listed), ("derived", derived)):
            if spec is None:
                print(f"  {label}: none")
                continue
            peaks = ", ".join(f"{mode} {value / 1e12:.1f} TFLOP/s" for mode, value in spec.peak_flops_per_s.items())
            print(f"  {label}: {spec.sms} SMs, {peaks}, {spec.memory_bytes_per_s / 1e9:.0f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
