"""Compute shapes a user asks to measure (`profiler calibrate --shapes FILE`), e.g. the per-device layer
shapes of the model they will train, as `predictor shapes` writes them. Each becomes benchmark cases next to
the grid's; the fit then uses their measured times for exactly these shapes (calibrate.fit.measured_shapes).

    shapes:
      - {op: conv2d, params: {N: 16, C: 4, F: 4, H: 64, W: 64, kernel: 3, stride: 1, padding: 1}}
      - {op: linear, params: {M: 16, N: 10, K: 64}, dtype: float32}

conv2d/conv3d and linear (M batch, N out, K in features) are measured in all three passes, linear as autograd
runs them; gemm forward; relu/batchnorm/maxpool/avgpool forward and backward, add forward. dtype defaults to
float32.
"""
from __future__ import annotations

import math

from profiler.bench_compute import (bmm_cases, conv_cases, conv_spatial, gemm_case, linear_cases, memory_op_case,
                                    run_under_dtype_flags, sdpa_cases, token_op_case)
from profiler.cases import BenchCase
from profiler.dtypes import canonical_dtype
from profiler.errors import UserError
from profiler.inputs import read_yaml
from profiler.opmath import shape_key

REQUIRED = {
    "conv2d": ("N", "C", "F", "H", "W", "kernel"),
    "conv3d": ("N", "C", "F", "D", "H", "W", "kernel"),
    "gemm": ("M", "N", "K"),
    "linear": ("M", "N", "K"),
    "relu": ("N", "C", "H", "W"),
    "batchnorm": ("N", "C", "H", "W"),
    "maxpool": ("N", "C", "H", "W", "kernel"),
    "avgpool": ("N", "C", "H", "W", "kernel"),
    "add": ("N", "C", "H", "W"),
    "bmm": ("B", "M", "N", "K"),
    "sdpa": ("B", "S", "D"),
    "layernorm": ("N", "C", "H", "W"),
    "gelu": ("N", "C", "H", "W"),
    "softmax": ("N", "C", "H", "W"),
}
OPTIONAL = {"conv2d": ("D", "stride", "padding", "groups"), "conv3d": ("stride", "padding", "groups"),
            "maxpool": ("D", "stride", "padding"), "avgpool": ("D", "stride", "padding"), "relu": ("D",), "batchnorm": ("D",), "add": ("D",),
            "sdpa": ("causal",)}
#: params that may be 0 (a flag or no padding)
ZERO_ALLOWED = ("padding", "causal")
CONV_DEFAULTS = {"stride": 1, "padding": 0}
TAGS = {"source": "shapes file"}
MAX_DIM = 1 << 20  # largest single size, channel or batch count
MAX_TENSOR_ELEMENTS = 1 << 31  # largest operand measured (8 GiB of float32)


def _tensors(op: str, p: dict) -> dict[str, int]:
    """Element counts of the operands a case allocates, by name."""
    spatial = [p[k] for k in ("D", "H", "W") if k in p]
    if op in ("gemm", "linear"):
        return {"A (M x K)": p["M"] * p["K"], "B (K x N)": p["K"] * p["N"], "C (M x N)": p["M"] * p["N"]}
    if op == "bmm":
        return {"A (B x M x K)": p["B"] * p["M"] * p["K"], "B (B x K x N)": p["B"] * p["K"] * p["N"],
                "C (B x M x N)": p["B"] * p["M"] * p["N"]}
    if op == "sdpa":
        return {"Q, K, V, O (B x S x D)": p["B"] * p["S"] * p["D"]}
    out = {"input": p["N"] * p["C"] * math.prod(spatial)}
    if op in ("conv2d", "conv3d"):
        out["weight"] = p["F"] * p["C"] * p["kernel"] ** len(spatial)
        out["output"] = p["N"] * p["F"] * math.prod(conv_spatial({**CONV_DEFAULTS, **p})[1])
    return out


def _entry_params(op: str, params, where: str) -> dict:
    if not isinstance(params, dict):
        raise UserError(f"{where}: 'params' must be a mapping of integers")
    missing = [k for k in REQUIRED[op] if k not in params]
    if missing:
        raise UserError(f"{where}: {op} needs params {', '.join(missing)}")
    unknown = sorted(str(k) for k in params if k not in REQUIRED[op] + OPTIONAL.get(op, ()))
    if unknown:
        raise UserError(f"{where}: {op} takes no param {unknown[0]} (known: {', '.join(REQUIRED[op] + OPTIONAL.get(op, ()))})")
    for key, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (value == 0 and key not in ZERO_ALLOWED):
            raise UserError(f"{where}: params.{key} must be a positive integer, got {value!r}")
        if value > MAX_DIM:
            raise UserError(f"{where}: params.{key} = {value} is larger than {MAX_DIM}")
    if "kernel" in params:
        padded = min(params[k] for k in ("D", "H", "W") if k in params) + 2 * params.get("padding", 0)
        if params["kernel"] > padded:
            raise UserError(f"{where}: params.kernel {params['kernel']} is larger than the padded input ({padded})")
    groups = params.get("groups", 1)
    if params.get("C", 1) % groups or params.get("F", groups) % groups:
        raise UserError(f"{where}: params.groups {groups} must divide C and F")
    for name, elements in _tensors(op, params).items():
        if elements > MAX_TENSOR_ELEMENTS:
            raise UserError(f"{where}: the {name} operand has {elements:.3g} elements, more than the "
                            f"{MAX_TENSOR_ELEMENTS:.3g} measured at most")
    return dict(params)


def cases_for(entry, where: str, device: str, dtypes: tuple[str, ...]) -> list[BenchCase]:
    if not isinstance(entry, dict) or "op" not in entry or "params" not in entry:
        raise UserError(f"{where}: expected a mapping with 'op' and 'params'")
    op = entry["op"]
    if op not in REQUIRED:
        raise UserError(f"{where}: op {op!r} cannot be measured; known: {', '.join(REQUIRED)}")
    params = _entry_params(op, entry["params"], where)
    try:
        dtype = canonical_dtype(str(entry.get("dtype", "float32")))
    except UserError as err:
        raise UserError(f"{where}: {err}") from None
    if dtype not in dtypes:
        raise UserError(f"{where}: dtype {dtype} is not measured on {device} (the grid runs {', '.join(dtypes)})")
    if op in ("conv2d", "conv3d"):
        dims = 3 if op == "conv3d" else 2
        if ("D" in params) != (dims == 3):
            raise UserError(f"{where}: {op} {'needs' if dims == 3 else 'takes no'} D")
        return conv_cases({**CONV_DEFAULTS, **params}, dtype, device, TAGS)
    if op == "linear":
        return linear_cases(params["M"], params["N"], params["K"], dtype, device, TAGS)
    if op == "gemm":
        case = gemm_case(params["M"], params["N"], params["K"], dtype, device)
        case.tags.update(TAGS)
        return [case]
    if op == "bmm":
        return bmm_cases(params["B"], params["M"], params["N"], params["K"], dtype, device, TAGS)
    if op == "sdpa":
        return sdpa_cases(params["B"], params["S"], params["D"], min(params.get("causal", 0), 1), dtype, device, TAGS)
    variants = ("fwd",) if op == "add" else ("fwd", "bwd")
    make = token_op_case if op in ("layernorm", "gelu", "softmax") else memory_op_case
    cases = [make(op, v, params, dtype, device) for v in variants]
    for case in cases:
        case.tags.update(TAGS)
    return cases


def load_shape_cases(path: str, device: str, dtypes: tuple[str, ...]) -> list[BenchCase]:
    """Every case of a shapes file, duplicates dropped; one-line UserError naming the file and entry."""
    data = read_yaml(path, "shapes", f"--shapes {path}")
    if not isinstance(data, dict) or not isinstance(data.get("shapes"), list) or not data["shapes"]:
        raise UserError(f"--shapes {path}: expected a non-empty list under 'shapes:'")
    cases, seen = [], set()
    for i, entry in enumerate(data["shapes"]):
        for case in cases_for(entry, f"--shapes {path}: shapes[{i}]", device, dtypes):
            key = (case.benchmark, case.variant, case.dtype, shape_key(case.params))
            if key not in seen:
                seen.add(key)
                # measured as the grid's points are (profiler.cases.measure_case), under their dtype's flags
                case.rotate = True
                cases.append(run_under_dtype_flags(case, device))
    return cases
