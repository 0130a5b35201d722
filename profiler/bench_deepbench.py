"""`profiler calibrate --device cuda --grid deepbench`: DeepBench's own GEMM and convolution shape list, timed here
so a user can set their GPU beside DeepBench's published times (profiler.deepbench imports those; calibrate.
gpu_kernel_fit fits the kernel model to either).

The list is profiler/data/deepbench_shapes.yaml, written from DeepBench's training workbooks by
`python -m profiler.bench_deepbench [WORKBOOK ...]` (default: calibrate/data/deepbench/*.xlsx; every workbook must
time the same shapes). GEMM rows are DeepBench's cuBLAS calls; convolutions are timed in their three passes but for
the input layers' backward-data (fewer than INPUT_LAYER_CHANNELS channels: no training step computes it), each
point measured as the default grid's are, in DEEPBENCH_DTYPES (float32 with TF32 off, float16 on tensor cores).
Samples carry extra["application"] and extra["deepbench_row"]. docs/calibration.md ("Shape grids"), docs/deepbench.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from profiler import opmath
from profiler.bench_compute import _tensor, element_bytes, run_under_dtype_flags
from profiler.cases import BenchCase
from profiler.deepbench import ConvShape, read_deepbench
from profiler.errors import UserError
from profiler.inputs import read_yaml

ROOT = Path(__file__).resolve().parent
SHAPES_FILE = ROOT / "data" / "deepbench_shapes.yaml"
#: the workbooks the shape list is written from by default (the repository's copy of DeepBench's results/train)
WORKBOOKS_DIR = ROOT.parent / "calibrate" / "data" / "deepbench"
#: DeepBench's training precisions: FP32 (TF32 off) and FP16 inputs on tensor cores
DEEPBENCH_DTYPES = ("float32", "float16")
#: a convolution with fewer input channels is an input layer: its backward-data is not timed
INPUT_LAYER_CHANNELS = 4
CONV_PASSES = ("fwd", "bwd_data", "bwd_weight")
GEMM_KEYS = ("M", "N", "K", "transpose_a", "transpose_b")
CONV_KEYS = ("N", "C", "H", "W", "F", "kernel", "stride", "padding")


# ---- the shape list --------------------------------------------------------------------------------------------
def conv_passes(params: dict) -> list[str]:
    return [p for p in CONV_PASSES if p != "bwd_data" or int(params["C"]) >= INPUT_LAYER_CHANNELS]


def shape_rows(files: Sequence[Path]) -> dict:
    """{"gemm": [...], "conv2d": [...]}: DeepBench's rows (params, application and, for a convolution, its timed
    passes) in the order of the first file that names applications, each with its own (a shape listed twice may
    name two); UserError when the files' shape lists differ."""
    lists = []
    for path in files:
        samples, _ = read_deepbench(path)
        rows, seen = [], set()  # (shape, the row's application) per row of the file's first precision
        for s in samples:
            source = s.extra.get("source")
            if s.benchmark not in ("gemm", "conv2d") or (s.dtype, source) in seen or s.dtype != samples[0].dtype:
                continue
            seen.add((s.dtype, source))
            rows.append(((s.benchmark, json.dumps(s.params, sort_keys=True)), s.extra.get("application") or ""))
        lists.append((Path(path), rows))
    if not lists:
        raise UserError("no DeepBench file given")
    first_path, first = next((item for item in lists if any(app for _, app in item[1])), lists[0])
    for path, rows in lists:
        if Counter(key for key, _ in rows) != Counter(key for key, _ in first):
            raise UserError(f"{path}: its GEMM and convolution shapes differ from {first_path}'s; "
                            "a shape list is written from files of one DeepBench version")
    out: dict = {"gemm": [], "conv2d": []}
    for (op, text), application in first:
        params = json.loads(text)
        row = {**{k: params[k] for k in (GEMM_KEYS if op == "gemm" else CONV_KEYS)}, "application": application}
        if op == "conv2d":
            row["passes"] = conv_passes(params)
        out[op].append(row)
    return out


def write_shapes(files: Sequence[Path], out: Path = SHAPES_FILE) -> dict:
    rows = shape_rows(files)
    names = (f"the {len(files)} workbooks in calibrate/data/deepbench"
             if all(Path(f).resolve().parent == WORKBOOKS_DIR.resolve() for f in files)
             else ", ".join(sorted(Path(f).name for f in files)))
    lines = [f"# DeepBench's training GEMM and convolution shapes ({len(rows['gemm'])} GEMMs, {len(rows['conv2d'])} "
             "convolutions), in its order, with the application",
             f"# it names for each. Written by `python -m profiler.bench_deepbench` from {names}",
             "# (Baidu Research DeepBench, Apache-2.0: calibrate/data/deepbench/LICENSE); do not edit.",
             "# GEMM: cuBLAS's column-major call, transposes its flags. Convolution: kernel/stride/padding [vertical,",
             f"# horizontal]; passes: the ones timed (no backward-data for an input layer of < {INPUT_LAYER_CHANNELS} "
             "channels).", "gemm:"]
    lines += [f"  - {json.dumps(row, separators=(', ', ': '))}" for row in rows["gemm"]]
    lines.append("conv2d:")
    lines += [f"  - {json.dumps(row, separators=(', ', ': '))}" for row in rows["conv2d"]]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def load_shapes(path: Path = SHAPES_FILE) -> dict:
    data = read_yaml(path, "DeepBench shape list")
    if not isinstance(data, dict) or not isinstance(data.get("gemm"), list) or not isinstance(data.get("conv2d"), list):
        raise UserError(f"{path}: expected 'gemm' and 'conv2d' lists (regenerate: python -m profiler.bench_deepbench)")
    return data


# ---- the cases -------------------------------------------------------------------------------------------------
def gemm_operands(m: int, n: int, k: int, ta: bool, tb: bool, dtype: str, device: str):
    """(X, Y) whose row-major product X Y (N, M) is DeepBench's column-major C = op(A) op(B) (M x N): cublas<t>gemm(
    transa, transb, M, N, K) on A (M x K, stored K x M where transpose_a) and B (K x N, stored N x K where
    transpose_b). X (N, K) = op(B)^T and Y (K, M) = op(A)^T are transposed views exactly where DeepBench's
    operands are transposed, so torch.mm hands cuBLAS the same flags, sizes and leading dimensions."""
    y = _tensor((m, k), dtype, device).t() if ta else _tensor((k, m), dtype, device)
    x = _tensor((k, n), dtype, device).t() if tb else _tensor((n, k), dtype, device)
    return x, y


def gemm_case(row: dict, dtype: str, device: str, tags: dict) -> BenchCase:
    """DeepBench's GEMM (gemm_operands), its result allocated per call."""
    m, n, k, ta, tb = (row[key] for key in GEMM_KEYS)

    def build():
        x, y = gemm_operands(m, n, k, ta, tb, dtype, device)
        return lambda: torch.mm(x, y)

    params = {"M": m, "N": n, "K": k, "transpose_a": bool(ta), "transpose_b": bool(tb)}
    return BenchCase("gemm", "fwd", params, dtype, opmath.gemm_flops(m, n, k),
                     opmath.gemm_bytes(m, n, k, element_bytes(dtype)), build, dict(tags))


def conv_cases(row: dict, dtype: str, device: str, tags: dict) -> list[BenchCase]:
    """The row's timed passes of an NCHW convolution (backward passes through aten.convolution_backward with an
    output mask, as profiler.bench_compute.conv_cases); FLOPs and bytes as profiler.deepbench counts them."""
    (r, s), (sv, sh), (ph, pw) = row["kernel"], row["stride"], row["padding"]
    shape = ConvShape(row["N"], row["C"], row["H"], row["W"], row["F"], r, s, ph, pw, sv, sh)
    p, q = shape.output()
    flops = opmath.conv_flops(shape.n, shape.c, shape.f, r * s, p * q)
    nbytes = element_bytes(dtype) * (shape.n * shape.c * shape.h * shape.w + shape.f * shape.c * r * s
                                     + shape.n * shape.f * p * q)
    stride, padding = [sv, sh], [ph, pw]

    def builder(variant: str):
        def build():
            x = _tensor((shape.n, shape.c, shape.h, shape.w), dtype, device)
            w = _tensor((shape.f, shape.c, r, s), dtype, device)
            if variant == "fwd":
                return lambda: F.conv2d(x, w, stride=stride, padding=padding)
            dy = _tensor((shape.n, shape.f, p, q), dtype, device)
            mask = [variant == "bwd_data", variant == "bwd_weight", False]
            return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, stride, padding, [1, 1], False,
                                                               [0, 0], 1, mask)

        return build

    return [BenchCase("conv2d", v, shape.params(), dtype, int(flops), int(nbytes), builder(v), dict(tags))
            for v in row["passes"]]


def plan_deepbench(device: str, shapes: Optional[dict] = None) -> list[BenchCase]:
    """Every point of the DeepBench grid, dtype-major, each under its dtype's flags and rotating its operands."""
    shapes = shapes or load_shapes()
    cases: list[BenchCase] = []
    for dtype in DEEPBENCH_DTYPES:
        first = len(cases)
        for i, row in enumerate(shapes["gemm"]):
            cases.append(gemm_case(row, dtype, device, {"application": row["application"], "deepbench_row": i}))
        for i, row in enumerate(shapes["conv2d"]):
            cases += conv_cases(row, dtype, device, {"application": row["application"], "deepbench_row": i})
        for case in cases[first:]:
            if not case.tags["application"]:
                del case.tags["application"]
            case.tags["grid"] = "deepbench"
            run_under_dtype_flags(case, device)
            case.rotate = True
    return cases


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profiler.bench_deepbench",
                                     description="write profiler/data/deepbench_shapes.yaml from DeepBench workbooks")
    parser.add_argument("files", nargs="*", type=Path, help="DeepBench workbooks or text output (default: "
                                                             "calibrate/data/deepbench/*.xlsx)")
    parser.add_argument("--out", type=Path, default=SHAPES_FILE)
    args = parser.parse_args(argv)
    files = args.files or sorted(WORKBOOKS_DIR.glob("*.xlsx"))
    try:
        rows = write_shapes(files, args.out)
    except UserError as err:
        print(f"python -m profiler.bench_deepbench: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {len(rows['gemm'])} GEMMs, {len(rows['conv2d'])} convolutions from {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
