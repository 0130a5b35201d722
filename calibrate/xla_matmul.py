"""OpenXLA's measured GEMM throughput on a current GPU as GPU-kernel-model samples (docs/gpu-kernels.md).

OpenXLA's GPU cost model carries a table of measured matrix products per GPU (b independent m x n x k products,
FLOP/s = 2 b m n k / time) in bf16 and in f32 at XLA's default precision (TF32 tensor cores); the repository
carries its H100 (sm_90) and B200 (sm_100_B200) tables as calibrate/data/xla_matmul_<key>.yaml
(scripts/xla_matmul_extract.py). A batch of b products is taken as one b·m x n x k GEMM: the same tiles and waves,
its operands read once per product.
"""
from __future__ import annotations

import math
from pathlib import Path

from calibrate.gpu_kernel_fit import KernelSample
from profiler.errors import UserError
from profiler.inputs import read_yaml

#: the table's GPU keys and the datasheet entry (calibrate/data/gpus.yaml) each was measured on; sm_90 is taken as
#: the H100 SXM5, the part Google's A3 machines carry (the table does not name the variant: an assumption)
GPU_OF_KEY = {"sm_90": "H100 SXM5", "sm_100_B200": "B200"}
DATA_FILES = tuple(Path(__file__).resolve().parent / "data" / f"xla_matmul_{key}.yaml" for key in GPU_OF_KEY)
DATA_FILE = DATA_FILES[0]  # the H100 table
#: the table's columns after b, m, n, k and the dtype each is costed in (f32 ran on TF32 tensor cores)
COLUMNS = ("bfloat16", "tf32")
MAX_DIM = 1 << 20


def _entry(row, path: Path, index: int) -> tuple[int, int, int, int, float, float]:
    where = f"{path}: field 'entries[{index}]'"
    if not isinstance(row, list) or len(row) != 4 + len(COLUMNS):
        raise UserError(f"{where}: expected [b, m, n, k, {', '.join(c + ' FLOP/s' for c in COLUMNS)}]")
    dims, rates = row[:4], row[4:]
    if any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_DIM for v in dims):
        raise UserError(f"{where}: b, m, n, k must be integers in 1..{MAX_DIM}, got {dims!r}")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 for v in rates):
        raise UserError(f"{where}: FLOP/s must be finite positive numbers, got {rates!r}")
    return (*dims, *map(float, rates))


def load(path: Path | str = DATA_FILE) -> tuple[str, dict[str, list[KernelSample]]]:
    """(GPU datasheet name, dtype -> samples, each labelled by its reduction depth K for leave-one-group-out)."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or not data["entries"]:
        raise UserError(f"{path}: expected a mapping with a non-empty 'entries' list")
    key = data.get("gpu_key")
    if key not in GPU_OF_KEY:
        raise UserError(f"{path}: field 'gpu_key': {key!r} is not one of {', '.join(GPU_OF_KEY)}")
    samples: dict[str, list[KernelSample]] = {dtype: [] for dtype in COLUMNS}
    for index, row in enumerate(data["entries"]):
        b, m, n, k, *rates = _entry(row, path, index)
        params = {"M": b * m, "N": n, "K": k, "transpose_a": False, "transpose_b": False}
        for dtype, rate in zip(COLUMNS, rates):
            samples[dtype].append(KernelSample("gemm", "fwd", params, dtype, 2.0 * b * m * n * k / rate, f"K{k}"))
    return GPU_OF_KEY[key], samples


def grid(key: str, column: str, path: Path | str | None = None
         ) -> tuple[tuple[int, ...], dict[tuple[int, int, int], float]]:
    """The single products (b = 1) of table `key`'s `column` (from `path`, default the carried table of that key): (the
    dimensions measured, in rising order, and (m, n, k) -> FLOP/s at every combination of them); a one-line error
    when the table is not a full grid."""
    path = Path(path) if path is not None else DATA_FILES[tuple(GPU_OF_KEY).index(key)]
    data = read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise UserError(f"{path}: expected a mapping with an 'entries' list")
    at = COLUMNS.index(column)
    rates = {}
    for index, row in enumerate(data["entries"]):
        b, m, n, k, *measured = _entry(row, path, index)
        if b == 1:
            rates[(m, n, k)] = measured[at]
    dims = tuple(sorted({d for shape in rates for d in shape}))
    if len(dims) < 2 or len(rates) != len(dims) ** 3:
        raise UserError(f"{path}: field 'entries': the b = 1 products do not cover every (m, n, k) of {dims}")
    return dims, rates
