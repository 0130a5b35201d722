"""Measured FP8 matrix products on a Hopper GPU from public tables (DeepGEMM's and tilelang's READMEs, on an H800):
held-out checks of a profile's FP8 products, which nothing is fitted to (calibrate/data/fp8_products_h800.yaml;
docs/decisions/2026-12-07-fp8-gemm-shapes.md)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from profiler.errors import UserError
from profiler.inputs import read_yaml

DATA_FILE = Path(__file__).resolve().parent / "data" / "fp8_products_h800.yaml"


class Product(NamedTuple):
    """`groups` products of m x n x k measured together at `flops_per_s` (a grouped product: groups > 1)."""

    source: str
    groups: int
    m: int
    n: int
    k: int
    flops_per_s: float

    @property
    def time_s(self) -> float:
        return 2.0 * self.groups * self.m * self.n * self.k / self.flops_per_s


def load(path: Path | str = DATA_FILE) -> tuple[str, list[Product]]:
    """(the datasheet GPU the products were measured on, every product of every source); a malformed file is a
    one-line error naming the file and the field."""
    data = read_yaml(Path(path), "FP8 products")
    if not isinstance(data, dict) or not isinstance(data.get("gpu"), str) or not isinstance(data.get("entries"), dict):
        raise UserError(f"{path}: expected a mapping with 'gpu' (text) and 'entries' (source -> rows)")
    sources = data.get("sources") or {}
    out = []
    for source, rows in data["entries"].items():
        if source not in sources:
            raise UserError(f"{path}: field 'entries.{source}': no 'sources.{source}' says where it comes from")
        if not isinstance(rows, list) or not rows:
            raise UserError(f"{path}: field 'entries.{source}': expected a non-empty list of rows")
        for i, row in enumerate(rows):
            if (not isinstance(row, list) or len(row) != 5 or any(isinstance(v, bool) for v in row)
                    or not all(isinstance(v, int) and v > 0 for v in row[:4])
                    or not isinstance(row[4], (int, float)) or row[4] <= 0):
                raise UserError(f"{path}: field 'entries.{source}[{i}]': expected [groups, m, n, k, TFLOP/s], positive "
                                f"integers and a positive rate, got {row!r}")
            out.append(Product(source, *row[:4], float(row[4]) * 1e12))
    return data["gpu"], out
