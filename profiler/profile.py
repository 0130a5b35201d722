"""The versioned profile: one schema for loading, validating and atomically writing profile YAML.

A profile holds raw benchmark samples (written by `profiler`) and fitted coefficients (written by
`calibrate`). `coefficients` is validated by calibrate's own schema; here it is any mapping.
Conventions: SI units, seconds and bytes; every sample keeps all its per-call times.
"""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from profiler import inputs
from profiler.errors import UserError
from profiler.outputs import check_output, check_writable, write_atomic  # noqa: F401 - re-exported

SCHEMA_VERSION = 1

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
#: Sample.extra["layer"] of the weight-bound convolution design (profiler.bench_compute, calibrate.backends.host_fit)
WEIGHT_DESIGN_LAYER = "weight_design"

#: a duration or amount that must be finite and larger than zero
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Sample(BaseModel):
    """One benchmark point: what ran (benchmark, variant, params), where, and every per-call time.

    benchmark: gemm, conv2d, conv3d, batchnorm, relu, maxpool, add, stream, alloc, host_device,
               allreduce, allgather, reduce_scatter, alltoall, broadcast, sendrecv, halo.
    variant:   fwd | bwd_data | bwd_weight (compute); copy | scale | add | triad | dot (stream);
               fresh | reused (alloc: first touch of a tensor above the mmap threshold);
               h2d_pinned | h2d_pageable | d2h_pinned | d2h_pageable; latency | throughput (collectives).
    params:    shape (gemm M,N,K; conv N,C,F,H,W[,D],kernel,stride,padding), size_bytes (S as in
               nccl-tests), group {size, ranks, hosts, nodes}, and anything else that identifies the point.
    flops / bytes_moved: per call, so throughput and arithmetic intensity can be derived.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    benchmark: str
    variant: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    device: str
    dtype: str = "float32"
    threads: int = Field(ge=1)
    times_s: list[Positive] = Field(min_length=1)
    flops: Optional[float] = Field(default=None, ge=0)
    bytes_moved: Optional[float] = Field(default=None, ge=0)
    extra: dict[str, Any] = Field(default_factory=dict)


class GPUInfo(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    name: str
    memory_bytes: Optional[Positive] = None
    sm_clock_mhz: Optional[float] = None
    mem_clock_mhz: Optional[float] = None
    power_limit_w: Optional[float] = None
    temperature_c: Optional[float] = None
    throttle_reasons: list[str] = Field(default_factory=list)
    pcie_generation: Optional[int] = None
    pcie_width: Optional[int] = None
    nvlink_links: Optional[int] = None
    #: streaming multiprocessors (torch.cuda.get_device_properties().multi_processor_count): the GPU kernel
    #: model's wave count (calibrate.gpu_kernels); None where not recorded (the datasheet's count is used)
    sms: Optional[int] = Field(default=None, ge=1)


class Machine(BaseModel):
    """Machine metadata. `gpus_per_node` and `device_memory_bytes` are what the predictor needs."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    hostname: str
    cpu_model: Optional[str] = None
    cpu_cores: Optional[int] = Field(default=None, ge=1)
    #: the vector ISA PyTorch's CPU kernels dispatch to (torch.backends.cpu.get_cpu_capability(): "AVX512",
    #: "AVX2", ...); None in profiles written before it was recorded
    cpu_capability: Optional[str] = None
    memory_bytes: Optional[Positive] = None
    gpus: list[GPUInfo] = Field(default_factory=list)
    gpus_per_node: Optional[int] = Field(default=None, ge=1)
    nodes: int = Field(default=1, ge=1)
    device_memory_bytes: Optional[Positive] = None
    driver_version: Optional[str] = None
    versions: dict[str, Optional[str]] = Field(default_factory=dict)


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["calibrated", "published"]
    source: str


class CorrectionRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    machine: Machine
    provenance: Provenance
    created: str
    settings: dict[str, Any] = Field(default_factory=dict)
    samples: list[Sample] = Field(default_factory=list)
    coefficients: dict[str, Any] = Field(default_factory=dict)
    correction: Optional[CorrectionRef] = None

    @field_validator("created")
    @classmethod
    def _iso_date(cls, value: str) -> str:
        try:
            _dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"must be an ISO-8601 date and time (e.g. 2025-01-31T12:00:00+00:00), got {value!r}") from None
        return value


def utc_now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _first_error(path: Path, err: ValidationError) -> str:
    e = err.errors()[0]
    where = ".".join(str(p) for p in e["loc"]) or "(top level)"
    more = f" (and {err.error_count() - 1} more problems)" if err.error_count() > 1 else ""
    return f"{path}: field '{where}': {e['msg'].removeprefix('Value error, ')}{more}"


def profile_from_dict(data: Any, path: Path | str = "<profile>") -> Profile:
    """Validate a parsed profile mapping; UserError names the field on failure."""
    path = Path(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a profile (expected a YAML mapping at the top level)")
    version = data.get("schema_version")
    if version is None:
        raise UserError(f"{path}: field 'schema_version' is missing (not a paraoracle profile?)")
    if version != SCHEMA_VERSION:
        raise UserError(f"{path}: field 'schema_version' is {version!r}; this paraoracle reads version {SCHEMA_VERSION}")
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        raise UserError(_first_error(path, err)) from None


def load_profile(path: Path | str) -> Profile:
    """Read and validate a profile YAML (through profiler.inputs: regular file, size cap, UTF-8, plain
    data only); every failure is a one-line UserError naming the file."""
    path = Path(path)
    if not os.path.lexists(path):
        raise UserError(f"{path}: no such profile file")
    text = inputs.read_text(path, "profile")
    data = inputs.parse_yaml(text, str(path), invalid="corrupt YAML")
    return profile_from_dict(data, path)


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120)


def save_profile(profile: Profile, path: Path | str) -> None:
    write_atomic(path, dump_yaml(profile.model_dump(mode="json", exclude_none=True)))
