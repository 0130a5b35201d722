"""The published systems' figures, as data: `calibrate/data/published/{figures,gpus,nodes}.yaml`.

Each figure is a value in SI units with its source (verified / third-party / derived / unverified / assumed) and
an optional range; `python -m calibrate.published` turns them into profiles. Files are read through
profiler.inputs and validated here; every error is one line naming the file and the field. The layout (one file
of shared figures, one of GPUs, one of nodes; `like:` and figure names) is described in docs/calibration.md
("Published reference profiles") and in each file's header.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from calibrate.coefficients import Estimate
from calibrate.xla_matmul import COLUMNS, GPU_OF_KEY
from profiler import inputs
from profiler.dtypes import DTYPE_BYTES
from profiler.errors import UserError

DATA_DIR = Path(__file__).resolve().parent / "data" / "published"
#: the shared figures the profile builder itself uses (calibrate.published) and the CPU loaders' decode costs
#: (predictor.at_scale.DECODERS); nodes may name any figure
REQUIRED_FIGURES = ("copy_alpha", "kernel_launch", "overlap_efficiency", "winograd_reduction", "stream_latency",
                    "net_fill", "grouped_conv_forward_triad_share", "grouped_conv_backward_triad_share",
                    "grouped_conv_reference_bytes_per_s", "grouped_conv_reference_sm_hz", "host_layer_forward",
                    "host_layer_backward", "decode_opencv", "decode_tfdata", "expert_gemm_dispatch",
                    "expert_gemm_dispatch_fp8")
#: the file name of a node's profile: its key in nodes.yaml and this suffix
PROFILE_SUFFIX = ".published.yaml"

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class Fig(BaseModel):
    """A published figure: value (SI), optional range, and where it comes from. A number may be written as the
    quotient its source derives it by, [a, b, ...] = a / b / ... (an achieved GEMM rate over the peak)."""

    model_config = _STRICT

    value: Union[int, float]
    source: str = Field(min_length=1)
    low: Optional[float] = None
    high: Optional[float] = None

    @field_validator("value", "low", "high", mode="before")
    @classmethod
    def _quotient(cls, v):
        if not isinstance(v, list):
            return v
        if len(v) < 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) or 0 in v[1:]:
            raise ValueError("a quotient is a list of two or more numbers, [a, b, ...] = a / b / ..., none but the "
                             "first zero")
        out = v[0]
        for x in v[1:]:
            out = out / x
        return out

    @model_validator(mode="after")
    def _in_range(self) -> "Fig":
        if (self.low is not None and self.low > self.value) or (self.high is not None and self.high < self.value):
            raise ValueError(f"the range {self.low} .. {self.high} must hold the value {self.value}")
        return self

    def estimate(self) -> Estimate:
        return Estimate(value=self.value, low=self.low if self.low is not None else self.value,
                        high=self.high if self.high is not None else self.value)


class GemmCurve(BaseModel):
    """Measured throughput of n^3 matrix products, in rising n: points are (n, FLOP/s)."""

    model_config = _STRICT

    points: tuple[tuple[int, float], ...] = Field(min_length=1)
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _rising(self) -> "GemmCurve":
        sizes = [n for n, _ in self.points]
        if sizes != sorted(set(sizes)) or min(rate for _, rate in self.points) <= 0:
            raise ValueError("points must rise in n, with positive FLOP/s")
        return self


class GemmGrid(BaseModel):
    """A table of measured matrix products by M, N and K that a GPU's GEMM efficiency is read from: one column of
    OpenXLA's measured table for that GPU (calibrate.xla_matmul; calibrate.published.gemm_grid_efficiency)."""

    model_config = _STRICT

    table: str = Field(min_length=1)  # the table's GPU key (calibrate.xla_matmul.GPU_OF_KEY)
    column: str = Field(min_length=1)  # the table's dtype column (calibrate.xla_matmul.COLUMNS)
    #: True: each product's time carried from the column's math to this dtype's by the GPU kernel model fitted to the
    #: column (what the faster math shortens and what it does not: calibrate.published.converted_rates); False: the
    #: column's shares of its largest product taken as they are
    via_kernel_model: bool = False
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _known(self) -> "GemmGrid":
        if self.table not in GPU_OF_KEY:
            raise ValueError(f"table {self.table!r} is not one of {', '.join(GPU_OF_KEY)}")
        if self.column not in COLUMNS:
            raise ValueError(f"column {self.column!r} is not one of {', '.join(COLUMNS)}")
        return self


class GPU(BaseModel):
    model_config = _STRICT

    name: str
    memory_bytes: Fig
    clock_mhz: Union[int, float] = Field(gt=0)
    nvlink_links: int = Field(ge=0)
    pcie_generation: int = Field(ge=1)
    peak_flops: dict[str, Fig] = Field(min_length=1)  # dtype -> dense peak FLOP/s
    achievable_fraction: dict[str, Fig]  # dtype -> achieved GEMM / peak
    triad_bytes_per_s: Fig
    h2d_bytes_per_s: Fig
    d2h_bytes_per_s: Fig
    #: dtype -> measured GEMM throughput by size, where published (calibrate.published.gemm_efficiency)
    gemm_by_size: dict[str, GemmCurve] = Field(default_factory=dict)
    #: dtype -> measured GEMM throughput by M, N and K, where published (calibrate.published.gemm_grid_efficiency);
    #: it takes the place of gemm_by_size for its dtypes
    gemm_grid: dict[str, GemmGrid] = Field(default_factory=dict)
    #: the GPU (calibrate/data/gpus.yaml name) whose fitted kernel model costs this GPU's 3-D convolutions: its own
    #: chip's where DeepBench or a shipped calibration timed it, else a measured one's (calibrate.measured_kernels)
    conv3d_kernels: Optional[str] = None

    @model_validator(mode="after")
    def _fractions(self) -> "GPU":
        named = set(self.peak_flops) | set(self.achievable_fraction) | set(self.gemm_by_size) | set(self.gemm_grid)
        unknown = sorted(named - set(DTYPE_BYTES))
        if unknown:
            raise ValueError(f"unknown dtype {unknown[0]!r} (known: {', '.join(DTYPE_BYTES)})")
        missing = sorted(set(self.peak_flops) - set(self.achievable_fraction))
        if missing:
            raise ValueError(f"achievable_fraction needs every dtype of peak_flops (missing: {', '.join(missing)})")
        return self


class Node(BaseModel):
    model_config = _STRICT

    file: str
    title: str
    gpu: GPU
    gpus_per_node: int = Field(ge=1)
    cpu_model: str
    cpu_cores: int = Field(ge=1)
    host_memory_bytes: float = Field(gt=0)
    host_memory_bytes_per_s: Fig
    node_source: str
    allreduce_bus_bytes_per_s: Fig
    #: group size -> the all-reduce bus bandwidth of that many GPUs of one node, where they are not all linked alike
    #: (LinkModel.bus_bandwidth_by_group); other sizes take allreduce_bus_bytes_per_s
    allreduce_bus_bytes_per_s_by_group: dict[int, Fig] = Field(default_factory=dict)
    #: a measured nccl-tests all-reduce sweep inside one node of this system (a CSV of calibrate/data/published:
    #: group_size, size_bytes, time_s) with its source: the profile's intra-node all-reduce of a group size it has
    #: follows it (calibrate.published.sweep_fits); other group sizes and groups across nodes take the link model
    allreduce_sweep: Optional[str] = None
    allreduce_sweep_source: str = ""
    other_collective_bus_bytes_per_s: Fig
    p2p_bytes_per_s: Fig
    base_latency_s: Fig
    step_latency_s: Fig
    inter_bus_bytes_per_s: Fig
    inter_step_latency_s: Fig
    inter_p2p_bytes_per_s: Fig
    rails_per_node: int = Field(default=1, ge=1)  # NICs NCCL uses per node
    nodes_per_leaf: Optional[int] = Field(default=None, ge=1)
    oversubscription: float = Field(default=1.0, ge=1.0)
    fabric_source: str = "leaf size and over-subscription not published: one non-blocking switch assumed"
    #: whether the system's operator screens its GPUs' speed before jobs get them (calibrate.spread.screened_device);
    #: "unknown" where no source says: screened for the prediction, unscreened at the interval's slow end
    gpu_screening: Literal["screened", "unscreened", "unknown"]
    screening_source: str
    #: the host time per layer pass of this system's software stack where its own measured runs give it
    #: (predictor.published.host_fit); without them the shared figures (our H200 node's, figures.yaml)
    host_layer_forward: Optional[Fig] = None
    host_layer_backward: Optional[Fig] = None
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _host_figures_paired(self) -> "Node":
        if (self.host_layer_forward is None) != (self.host_layer_backward is None):
            raise ValueError("host_layer_forward and host_layer_backward go together (one fit gives both)")
        return self

    @model_validator(mode="after")
    def _groups_inside_the_node(self) -> "Node":
        outside = sorted(g for g in self.allreduce_bus_bytes_per_s_by_group if not 2 <= g < self.gpus_per_node)
        if outside:
            raise ValueError(f"allreduce_bus_bytes_per_s_by_group: group size {outside[0]} is not between 2 and "
                             f"the node's {self.gpus_per_node - 1} (the whole node takes allreduce_bus_bytes_per_s)")
        return self


def _first_error(label: str, err: ValidationError, prefix: str = "") -> UserError:
    e = err.errors()[0]
    where = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "") or "(top level)"
    return UserError(f"{label}: field '{where}': {e['msg'].removeprefix('Value error, ')}")


def _mapping(path: Path) -> dict:
    data = inputs.read_yaml(path, "file")
    if not isinstance(data, dict) or not data:
        raise UserError(f"{path}: expected a mapping of named entries")
    return data


def _unfold(data: dict, path: Path) -> dict[str, dict]:
    """Each entry with `like: <earlier entry>` completed by that entry's fields (its own fields win)."""
    out: dict[str, dict] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise UserError(f"{path}: field '{key}': expected a mapping")
        entry = dict(entry)
        like = entry.pop("like", None)
        if like is not None:
            if like not in out:
                raise UserError(f"{path}: field '{key}.like': {like!r} is not an entry above it")
            entry = {**out[like], **entry}
        out[str(key)] = entry
    return out


def _name_figures(entry: dict, figures: dict[str, Fig], path: Path, key: str, fields) -> dict:
    """Fields given as the name of a shared figure (figures.yaml) replaced by that figure."""
    entry = dict(entry)
    for name in fields:
        value = entry.get(name)
        if isinstance(value, str):
            if value not in figures:
                raise UserError(f"{path}: field '{key}.{name}': {value!r} is not a figure of figures.yaml")
            entry[name] = figures[value]
    return entry


_FIG_FIELDS = tuple(name for name, info in Node.model_fields.items() if info.annotation is Fig)


def load_figures(folder: Path = DATA_DIR) -> dict[str, Fig]:
    path = folder / "figures.yaml"
    out = {}
    for key, entry in _mapping(path).items():
        try:
            out[str(key)] = Fig.model_validate(entry)
        except ValidationError as err:
            raise _first_error(str(path), err, str(key)) from None
    missing = [name for name in REQUIRED_FIGURES if name not in out]
    if missing:
        raise UserError(f"{path}: field '{missing[0]}': missing (a required shared figure)")
    return out


def load_gpus(folder: Path = DATA_DIR) -> dict[str, GPU]:
    path = folder / "gpus.yaml"
    out = {}
    for key, entry in _unfold(_mapping(path), path).items():
        try:
            out[key] = GPU.model_validate(entry)
        except ValidationError as err:
            raise _first_error(str(path), err, key) from None
    return out


def load_nodes(folder: Path = DATA_DIR, figures: Optional[dict[str, Fig]] = None,
               gpus: Optional[dict[str, GPU]] = None) -> list[Node]:
    """The nodes of nodes.yaml in file order; a node's `gpu` names an entry of gpus.yaml."""
    path = folder / "nodes.yaml"
    figures = load_figures(folder) if figures is None else figures
    gpus = load_gpus(folder) if gpus is None else gpus
    out = []
    for key, entry in _unfold(_mapping(path), path).items():
        if "file" in entry:
            raise UserError(f"{path}: field '{key}.file': not accepted (the file is the key + {PROFILE_SUFFIX})")
        gpu = entry.get("gpu")
        if gpu not in gpus:
            raise UserError(f"{path}: field '{key}.gpu': {gpu!r} is not a GPU of gpus.yaml")
        entry = _name_figures(entry, figures, path, key, _FIG_FIELDS) | {"gpu": gpus[gpu], "file": key + PROFILE_SUFFIX}
        try:
            out.append(Node.model_validate(entry))
        except ValidationError as err:
            raise _first_error(str(path), err, key) from None
    return out
