"""Bytes per element of every dtype name the tools accept, and the short names that stand for them: the one
table every stage reads (profiler cases, calibrate's fits and cost model, the predictor's memory and costs).
Imports only profiler.errors (which imports nothing). tf32 is float32 storage computed on TF32 tensor cores."""
from __future__ import annotations

from profiler.errors import UserError

DTYPE_BYTES = {"float64": 8, "float32": 4, "tf32": 4, "float16": 2, "bfloat16": 2, "float8": 1}
#: the name of the FP8 compute dtype (E4M3 operands of Transformer Engine's GEMMs) in samples, fits and plans
FP8 = "float8"
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp64": "float64",
                 "double": "float64", "float": "float32", "fp8": "float8"}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name or alias; ValueError naming the known ones otherwise."""
    try:
        return DTYPE_BYTES[DTYPE_ALIASES.get(dtype, dtype)]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join([*DTYPE_BYTES, *DTYPE_ALIASES])}") from None


def canonical_dtype(dtype: str) -> str:
    """The full name of a dtype name or alias (fp16 -> float16); UserError naming the known ones otherwise."""
    d = DTYPE_ALIASES.get(dtype, dtype)
    if d not in DTYPE_BYTES:
        raise UserError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return d
