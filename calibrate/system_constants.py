"""Per-GPU-family constants fitted to published measured training runs, applied to the published reference profiles.

Datasheet peaks and GEMM fractions do not say how fast a real training step runs: cuDNN convolutions reach another
fraction of peak than a large GEMM, memory-bound layers another fraction of STREAM. Per GPU family and dtype, time
scales over the datasheet roofline (flops, grouped convolutions, bytes), a family without rows taking the fleet's
(fleet_constants, for_family); across families, a factor per software stack and precision class (StackScales); and
the leave-one-source-out model error. `python -m predictor.published.fit` fits them into
`predictor/data/system_constants.yaml` (the predictor stage owns the file) and `python -m calibrate.published
--constants PATH` is given it. Fields: docs/calibration.md ("Published reference profiles");
docs/decisions/2026-12-01-system-constants.md, 2026-12-01-software-stacks.md, 2026-12-02-fleet-constants.md.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Union

from profiler.dtypes import DTYPE_ALIASES, FP8
from profiler.errors import UserError
from profiler.inputs import read_yaml

#: software stacks a published profile can scale its kernels for (`predictor run --stack`); "other" = neutral
STACKS = ("pytorch", "mxnet", "tensorflow", "paddle", "oneflow", "chainer", "other")
DEFAULT_STACK = "pytorch"
#: precision classes a stack's factor is fitted per: mixed precision runs other kernels (tensor cores, casts)
PRECISION_CLASSES = ("single", "mixed")


def precision_class(dtype: str) -> str:
    """"mixed" for half-precision and FP8 compute dtypes (float16, bfloat16, float8), else "single" (float32, tf32)."""
    return "mixed" if DTYPE_ALIASES.get(dtype, dtype) in ("float16", "bfloat16", FP8) else "single"


@dataclass(frozen=True)
class StackScales:
    """Time of a stack's training-step kernels over the reference (the row-weighted geometric mean of the
    stacks, = 1), per precision class: the same GPU runs the same model faster under one framework's kernels,
    layouts and fusions than another's (module docstring). Stacks without a factor are neutral (1)."""

    scales: dict[str, dict[str, float]] = field(default_factory=dict)
    rows: int = 0
    fitted_sources: tuple[str, ...] = ()

    def factor(self, stack: str, dtype: str) -> float:
        return self.scales.get(stack, {}).get(precision_class(dtype), 1.0)

    def to_dict(self) -> dict:
        return {"scales": {k: dict(v) for k, v in sorted(self.scales.items())}, "rows": self.rows,
                "fitted_sources": list(self.fitted_sources)}


def load_stacks(path: Union[str, Path]) -> StackScales:
    """The `software_stacks` section (neutral StackScales when the file or the section is absent)."""
    path = Path(path)
    if not path.exists():
        return StackScales()
    data = read_yaml(path) or {}
    section = data.get("software_stacks") if isinstance(data, dict) else None
    if section is None:
        return StackScales()
    where = f"{path}: software_stacks"
    scales = section.get("scales") if isinstance(section, dict) else None
    if not isinstance(scales, dict):
        raise UserError(f"{where}: must have a 'scales' mapping of stack -> precision class -> factor")
    out = {}
    for stack, table in scales.items():
        if stack not in STACKS:
            raise UserError(f"{where}.scales.{stack}: unknown stack (known: {', '.join(STACKS)})")
        table = _positive_map(table, f"{where}.scales.{stack}")
        if set(table) - set(PRECISION_CLASSES):
            raise UserError(f"{where}.scales.{stack}: keys must be {' or '.join(PRECISION_CLASSES)}")
        out[stack] = table
    return StackScales(out, int(section.get("rows", 0)), tuple(section.get("fitted_sources", ())))
_FAMILIES = (("A100-PCIe", r"A100[- ]PCI"), ("A100", r"A100"), ("H100", r"H100"), ("V100", r"V100"), ("P100", r"P100"))


def gpu_family(gpu_name: str) -> Optional[str]:
    """The family a GPU name belongs to (V100, A100, A100-PCIe, H100, P100), None when unknown."""
    return next((family for family, pattern in _FAMILIES if re.search(pattern, gpu_name, re.IGNORECASE)), None)


@dataclass(frozen=True)
class SystemConstants:
    """The fitted constants of one GPU family (module docstring)."""

    family: str
    flops_time_scale: dict[str, float] = field(default_factory=dict)
    grouped_time_scale: dict[str, float] = field(default_factory=dict)
    bytes_time_scale: dict[str, float] = field(default_factory=dict)
    per_layer_s: float = 0.0
    rows: int = 0
    fitted_sources: tuple[str, ...] = ()
    row_ids: tuple[str, ...] = ()
    from_fleet: tuple[str, ...] = ()  # dtypes completed from the fleet (for_family), not fitted to this family
    grouped_from_fleet: tuple[str, ...] = ()  # ... and dtypes whose grouped-convolution scale was
    fleet: Optional["SystemConstants"] = None  # the fleet those came from
    origin: str = "predictor.published.fit"  # who fitted them and where their row ids are (the file's `origin`)

    def describe(self, dtype: Optional[str] = None, grouped: bool = False) -> str:
        """Where the time scale of `dtype` (of grouped convolutions with `grouped`) comes from."""
        if self.family == "fleet":
            return (f"no published row of this GPU family and dtype: the fleet's geometric mean over the families "
                    f"fitted to {self.rows} single-node published rows of sources {', '.join(self.fitted_sources)} "
                    f"(calibrate.system_constants.fleet_constants)")
        if self.fleet is not None and dtype in (self.grouped_from_fleet if grouped else self.from_fleet):
            return self.fleet.describe(dtype, grouped)
        return (f"fitted to {self.rows} single-node published rows of sources {', '.join(self.fitted_sources)} "
                f"({self.origin})")

    def to_dict(self) -> dict:
        return {"flops_time_scale": dict(self.flops_time_scale), "grouped_time_scale": dict(self.grouped_time_scale),
                "bytes_time_scale": dict(self.bytes_time_scale),
                "per_layer_s": self.per_layer_s, "rows": self.rows, "fitted_sources": list(self.fitted_sources),
                "row_ids": list(self.row_ids)}


#: dtypes a family's constants are completed for from the fleet (for_family): the training dtypes of a profile
FLEET_DTYPES = ("float32", "tf32", "float16", "bfloat16")


def _geometric_mean(values) -> float:
    values = list(values)
    return round(math.exp(sum(math.log(v) for v in values) / len(values)), 4)


def _fleet_table(tables: list[dict[str, float]]) -> dict[str, float]:
    """Per dtype of FLEET_DTYPES, the geometric mean over families of their fitted value for it; for a dtype no
    family has, over the values of the same precision class (tf32 from float32, bfloat16 from float16), else
    over every value."""
    by_dtype: dict[str, list[float]] = {}
    for table in tables:
        for dtype, v in table.items():
            by_dtype.setdefault(dtype, []).append(v)
    out = {}
    for dtype in FLEET_DTYPES:
        values = by_dtype.get(dtype) or [v for d, vs in by_dtype.items() if precision_class(d) == precision_class(dtype)
                                          for v in vs] or [v for vs in by_dtype.values() for v in vs]
        if values:
            out[dtype] = _geometric_mean(values)
    return out


def fleet_constants(families: dict[str, "SystemConstants"]) -> Optional["SystemConstants"]:
    """What a GPU family is expected to lose against its datasheet for a dtype it has no published rows of: per
    dtype, the geometric mean of the fitted families' time scales (_fleet_table; each family one observation).

    The fitted scales agree across generations far better than with the datasheet's 1 (flops_time_scale 1.07-1.5
    for float16 and float32 on P100, V100, A100 and H100; grouped convolutions 4-7.6x): a GPU or dtype nobody
    measured is predicted from the fleet, not from its datasheet (docs/decisions/2026-12-02-fleet-constants.md).
    None when no family was fitted."""
    if not families:
        return None
    fitted = list(families.values())
    return SystemConstants(
        family="fleet", flops_time_scale=_fleet_table([c.flops_time_scale for c in fitted]),
        grouped_time_scale=_fleet_table([c.grouped_time_scale for c in fitted]),
        bytes_time_scale=_fleet_table([c.bytes_time_scale for c in fitted]),
        rows=sum(c.rows for c in fitted), fitted_sources=tuple(sorted({s for c in fitted for s in c.fitted_sources})))


def for_family(families: dict[str, "SystemConstants"], family: Optional[str]) -> Optional["SystemConstants"]:
    """The constants a family's profile uses: its own fitted ones, every dtype of FLEET_DTYPES it has no rows of
    taken from the fleet (fleet_constants; its grouped convolutions too); the fleet alone for a family with no
    rows; None when nothing was fitted."""
    fleet = fleet_constants(families)
    own = families.get(family or "")
    if fleet is None or own is None:
        return own or fleet
    filled = tuple(d for d in FLEET_DTYPES if d not in own.flops_time_scale and d in fleet.flops_time_scale)
    grouped = tuple(d for d in FLEET_DTYPES if d not in own.grouped_time_scale and d in fleet.grouped_time_scale)
    return replace(
        own, flops_time_scale=fleet.flops_time_scale | own.flops_time_scale,
        bytes_time_scale=fleet.bytes_time_scale | own.bytes_time_scale,
        grouped_time_scale=fleet.grouped_time_scale | own.grouped_time_scale, from_fleet=filled,
        grouped_from_fleet=grouped, fleet=fleet)


def _positive_map(value, where: str) -> dict[str, float]:
    if not isinstance(value, dict) or not all(isinstance(v, (int, float)) and 0 < v < 1e3 for v in value.values()):
        raise UserError(f"{where}: must map dtypes to positive numbers below 1000")
    return {str(k): float(v) for k, v in value.items()}


def load_model_error(path: Union[str, Path]) -> Optional[dict]:
    """The `model_error` section (held-out error quantiles of the published validation) or None; validated
    by calibrate.coefficients.ModelError where it is used."""
    path = Path(path)
    if not path.exists():
        return None
    data = read_yaml(path) or {}
    section = data.get("model_error") if isinstance(data, dict) else None
    return section if isinstance(section, dict) else None


def load_constants(path: Union[str, Path]) -> dict[str, SystemConstants]:
    """Family -> SystemConstants from the data file ({} when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return {}
    data = read_yaml(path) or {}
    families = data.get("families") if isinstance(data, dict) else None
    if not isinstance(families, dict):
        raise UserError(f"{path}: must have a 'families' mapping")
    origin = data.get("origin", SystemConstants.origin)
    if not isinstance(origin, str) or not origin:
        raise UserError(f"{path}: origin: must be a text (who fitted the constants, where their row ids are)")
    out = {}
    for family, entry in families.items():
        where = f"{path}: families.{family}"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: must be a mapping")
        per_layer = entry.get("per_layer_s", 0.0)
        if not isinstance(per_layer, (int, float)) or not 0 <= per_layer < 1e-2:
            raise UserError(f"{where}.per_layer_s: must be between 0 and 0.01 s")
        out[family] = SystemConstants(
            family=family, flops_time_scale=_positive_map(entry.get("flops_time_scale", {}), f"{where}.flops_time_scale"),
            grouped_time_scale=_positive_map(entry.get("grouped_time_scale", {}), f"{where}.grouped_time_scale"),
            bytes_time_scale=_positive_map(entry.get("bytes_time_scale", {}), f"{where}.bytes_time_scale"),
            per_layer_s=float(per_layer), rows=int(entry.get("rows", 0)),
            fitted_sources=tuple(entry.get("fitted_sources", ())), row_ids=tuple(entry.get("row_ids", ())),
            origin=origin)
    return out
