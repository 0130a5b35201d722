"""GPU datasheet figures (calibrate/data/gpus.yaml) and the math mode each dtype runs in, for the GPU kernel model.

A dtype's math mode decides its peak: float32 on CUDA cores; tf32, float16 and bfloat16 on tensor cores where the
GPU has them; float16 on a GPU without them at its half-precision CUDA-core rate, or at the float32 rate when the
kernels store FP16 and compute in FP32 (DeepBench's P100 "pseudo FP16" sheet: math "fp16_storage_fp32_math").
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calibrate.gpu_kernels import Hardware
from profiler import inputs
from profiler.dtypes import canonical_dtype
from profiler.errors import UserError

SPECS_FILE = Path(__file__).resolve().parent / "data" / "gpus.yaml"
#: DeepBench's and the importer's math modes (profiler.deepbench): how a sheet's FP16 kernels computed
FP16_STORAGE_FP32_MATH = "fp16_storage_fp32_math"


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
    """The datasheet entry whose longest name fragment occurs in gpu_name (case and spaces ignored)."""
    wanted = gpu_name.lower().replace(" ", "")
    matches = [(len(fragment), spec) for spec in load_specs(path) for fragment in spec.names
               if fragment.lower().replace(" ", "") in wanted]
    return max(matches, key=lambda m: m[0])[1] if matches else None


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
