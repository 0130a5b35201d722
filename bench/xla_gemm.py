"""GPU kernel model on OpenXLA's measured H100 GEMMs, held out by reduction depth (DeepBench's targets for comparison).

The GPU kernel model (calibrate.gpu_kernels) is fitted to every measured product of the table but those of one
reduction depth K and predicts those (K = 256 ... 4096, five groups), per dtype (bf16; f32 as XLA runs it, on TF32
tensor cores); in-sample beside it, and the shipped H100 profile's own prediction of the same calls (its GEMM fit
from a datasheet peak and one measured MAMF fraction). Data: calibrate/data/xla_matmul.yaml (calibrate.xla_matmul).
Writes results/xla-gemm.json and results/xla-gemm-rows.jsonl; --json prints {dtype: {held_out, in_sample,
published_profile}}.

    python -m bench xla-gemm [FILE] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np

from bench import describe
from bench.record import Figure, add_results_flag, record
from calibrate import gpu_kernel_fit as gf
from calibrate import gpu_specs
from calibrate.xla_matmul import DATA_FILE, load
from profiler.errors import UserError
from profiler.outputs import write_atomic

NAME = "xla-gemm"
TARGET_MEDIAN, TARGET_MEAN = 0.90, 0.85
#: the shipped profile whose GEMM fit is compared on the same calls
PROFILE = "h100-dgx-8gpu.published"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    describe(parser, __doc__)
    parser.add_argument("file", nargs="?", type=Path, default=DATA_FILE, metavar="FILE",
                        help="an OpenXLA GEMM table as YAML (default: the H100 table the repository carries)")
    parser.add_argument("--json", action="store_true", help="print {dtype: figures} as JSON")
    add_results_flag(parser)


def stats(predicted: np.ndarray, measured: np.ndarray) -> dict:
    acc = gf.accuracy(predicted, measured)
    kept = np.isfinite(acc)
    return {"rows": int(kept.sum()), "median_accuracy": float(np.median(acc[kept])),
            "mean_accuracy": float(np.mean(acc[kept])),
            "median_predicted_over_measured": float(np.median(predicted[kept] / measured[kept]))}


def evaluate(gpu: str, dtype: str, samples: list) -> tuple[dict, list[dict]]:
    """The held-out, in-sample and shipped-profile figures of one dtype, and a row per call."""
    from predictor.api import load_cost_model

    spec = gpu_specs.find_spec(gpu)
    if spec is None:
        raise UserError(f"GPU {gpu!r} is not in calibrate/data/gpus.yaml")
    hardware = gpu_specs.hardware(spec, dtype)
    measured = np.array([s.time_s for s in samples])
    values = gf.fit(samples, hardware)
    fitted = gf.predict(values, samples, hardware)
    held = gf.leave_one_group_out(samples, hardware)
    cm, _ = load_cost_model(PROFILE)
    shipped = np.array([cm.compute_time_s("gemm", "fwd", {k: s.params[k] for k in "MNK"}, dtype) for s in samples])
    rows = [{"dtype": dtype, "group": s.group, "params": {k: s.params[k] for k in "MNK"}, "measured_s": s.time_s,
             "held_out_s": float(h), "in_sample_s": float(f), "published_profile_s": float(p)}
            for s, h, f, p in zip(samples, held, fitted, shipped)]
    return {"held_out": stats(held, measured), "in_sample": stats(fitted, measured),
            "published_profile": stats(shipped, measured), "constants": values}, rows


def figures(summary: dict) -> list[Figure]:
    out = []
    for dtype, s in summary.items():
        out += [Figure(f"{dtype}: held-out median accuracy (DeepBench's target >= {100 * TARGET_MEDIAN:g})",
                       round(100 * s["held_out"]["median_accuracy"], 2), "%"),
                Figure(f"{dtype}: held-out mean accuracy (DeepBench's target >= {100 * TARGET_MEAN:g})",
                       round(100 * s["held_out"]["mean_accuracy"], 2), "%"),
                Figure(f"{dtype}: in-sample median accuracy", round(100 * s["in_sample"]["median_accuracy"], 2), "%"),
                Figure(f"{dtype}: {PROFILE} median accuracy",
                       round(100 * s["published_profile"]["median_accuracy"], 2), "%")]
    return out


def run(args) -> int:
    gpu, by_dtype = load(args.file)
    summary, all_rows = {}, []
    for dtype, samples in by_dtype.items():
        summary[dtype], rows = evaluate(gpu, dtype, samples)
        all_rows += rows
    args.results.mkdir(parents=True, exist_ok=True)
    write_atomic(args.results / f"{NAME}-rows.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in all_rows))
    if args.json:  # stdout holds the JSON alone
        with contextlib.redirect_stdout(sys.stderr):
            record(NAME, figures(summary), args.results)
        print(json.dumps({d: {k: v for k, v in s.items() if k != "constants"} for d, s in summary.items()},
                         indent=1, sort_keys=True))
        return 0
    path = record(NAME, figures(summary), args.results)
    print(f"{gpu}: rows {args.results / (NAME + '-rows.jsonl')}; figures {path}")
    return 0
