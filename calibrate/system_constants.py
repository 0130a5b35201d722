"""Per-GPU constants fitted to published measured training runs, applied to the published reference profiles.

Datasheet peaks and GEMM fractions do not say how fast a real training step runs: cuDNN convolutions reach
another fraction of peak than a large GEMM, memory-bound layers another fraction of STREAM, and a framework
spends host time on every layer. Three physical quantities per GPU family describe that, fitted to the
single-node rows of the published corpus by `python -m predictor.published.fit` (which writes
`calibrate/data/system_constants.yaml`) and read here when `python -m calibrate.published` renders a profile:

  flops_time_scale[dtype]  time of a GEMM/convolution over its datasheet roofline time (1 = the GEMM fraction)
  grouped_time_scale[dtype] the same for grouped and depthwise convolutions (their own cuDNN kernels)
  bytes_time_scale[dtype]  time of a memory-bound layer (BN, ReLU, add, pooling) over its STREAM-triad time
  per_layer_s              framework time per layer and pass on top of its kernels (FrameworkFit)

Each family's entry names the rows (ids and sources) it was fitted to. A `model_error` section holds the
quantiles of the leave-one-source-out error over the corpus (calibrate.coefficients.ModelError), which every
published profile carries so that `predictor run` intervals include the model's own error. Leave-one-source-out figures refit
them without the held-out source (predictor.published.loso); nothing here is fitted per row.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from profiler.errors import UserError
from profiler.inputs import read_yaml

CONSTANTS_FILE = Path(__file__).resolve().parent / "data" / "system_constants.yaml"
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

    def describe(self) -> str:
        return (f"fitted to {self.rows} single-node published rows of sources {', '.join(self.fitted_sources)} "
                f"(predictor.published.fit; ids in calibrate/data/system_constants.yaml)")

    def to_dict(self) -> dict:
        return {"flops_time_scale": dict(self.flops_time_scale), "grouped_time_scale": dict(self.grouped_time_scale),
                "bytes_time_scale": dict(self.bytes_time_scale),
                "per_layer_s": self.per_layer_s, "rows": self.rows, "fitted_sources": list(self.fitted_sources),
                "row_ids": list(self.row_ids)}


def _positive_map(value, where: str) -> dict[str, float]:
    if not isinstance(value, dict) or not all(isinstance(v, (int, float)) and 0 < v < 1e3 for v in value.values()):
        raise UserError(f"{where}: must map dtypes to positive numbers below 1000")
    return {str(k): float(v) for k, v in value.items()}


def load_model_error(path: Union[str, Path] = CONSTANTS_FILE) -> Optional[dict]:
    """The `model_error` section (held-out error quantiles of the published validation) or None; validated
    by calibrate.coefficients.ModelError where it is used."""
    path = Path(path)
    if not path.exists():
        return None
    data = read_yaml(path) or {}
    section = data.get("model_error") if isinstance(data, dict) else None
    return section if isinstance(section, dict) else None


def load_constants(path: Union[str, Path] = CONSTANTS_FILE) -> dict[str, SystemConstants]:
    """Family -> SystemConstants from the data file ({} when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return {}
    data = read_yaml(path) or {}
    families = data.get("families") if isinstance(data, dict) else None
    if not isinstance(families, dict):
        raise UserError(f"{path}: must have a 'families' mapping")
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
            fitted_sources=tuple(entry.get("fitted_sources", ())), row_ids=tuple(entry.get("row_ids", ())))
    return out
