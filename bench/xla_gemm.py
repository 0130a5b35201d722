"""GPU kernel model on OpenXLA's measured H100 and B200 GEMMs, held out by reduction depth; the H100 profile's FP8 products.

The kernel model (calibrate.gpu_kernels) is fitted to every product of a table but those of one depth K and predicts
those (K = 256 ... 4096), per GPU and dtype (bf16; f32 as XLA runs it, on TF32 tensor cores); in-sample beside it, and
for the H100 the shipped profile's prediction (in-sample too: it reads this table). Data: calibrate.xla_matmul, or
tables given as FILE; and the H100 profile's FP8 products against DeepGEMM's and tilelang's measured ones
(calibrate.fp8_products, nothing fitted to them; decisions/2026-12-07-fp8-gemm-shapes.md). Writes
results/xla-gemm.json and -rows.jsonl; --json prints {gpu: {dtype: figures}, "fp8": {source: figures}}.

    python -m bench xla-gemm [FILE...] [--json]
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
from calibrate.xla_matmul import DATA_FILES, load
from profiler.errors import UserError
from profiler.outputs import write_atomic

NAME = "xla-gemm"
TARGET_MEDIAN, TARGET_MEAN = 0.90, 0.85
#: the shipped profile whose GEMM fit is compared on the same calls, per GPU
PROFILES = {"H100 SXM5": "h100-dgx-8gpu.published"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    describe(parser, __doc__)
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE",
                        help="OpenXLA GEMM tables as YAML (default: the H100 and B200 tables the repository carries)")
    parser.add_argument("--json", action="store_true", help="print {gpu: {dtype: figures}} as JSON")
    add_results_flag(parser)


def stats(predicted: np.ndarray, measured: np.ndarray) -> dict:
    acc = gf.accuracy(predicted, measured)
    kept = np.isfinite(acc)
    return {"rows": int(kept.sum()), "median_accuracy": float(np.median(acc[kept])),
            "mean_accuracy": float(np.mean(acc[kept])),
            "median_predicted_over_measured": float(np.median(predicted[kept] / measured[kept]))}


def evaluate(gpu: str, dtype: str, samples: list, cm=None) -> tuple[dict, list[dict]]:
    """The held-out, in-sample and shipped-profile figures of one dtype, and a row per call; cm: the GPU's shipped
    profile (shipped_profile), loaded once by the caller."""
    spec = gpu_specs.find_spec(gpu)
    if spec is None:
        raise UserError(f"GPU {gpu!r} is not in calibrate/data/gpus.yaml")
    hardware = gpu_specs.hardware(spec, dtype)
    measured = np.array([s.time_s for s in samples])
    values = gf.fit(samples, hardware)
    fitted = gf.predict(values, samples, hardware)
    held = gf.leave_one_group_out(samples, hardware)
    if cm is None:
        cm = shipped_profile(gpu)
    shipped = np.full(len(samples), np.nan)
    if cm is not None:
        shipped = np.array([cm.compute_time_s("gemm", "fwd", {k: s.params[k] for k in "MNK"}, dtype)
                            for s in samples])
    rows = [{"gpu": gpu, "dtype": dtype, "group": s.group, "params": {k: s.params[k] for k in "MNK"},
             "measured_s": s.time_s, "held_out_s": float(h), "in_sample_s": float(f), "published_profile_s": float(p)}
            for s, h, f, p in zip(samples, held, fitted, shipped)]
    return {"held_out": stats(held, measured), "in_sample": stats(fitted, measured),
            "published_profile": stats(shipped, measured) if cm is not None else None, "constants": values}, rows


def fp8_products(cm=None) -> tuple[dict, list[dict]]:
    """The shipped profile's FP8 products (linear, forward) against the published measured ones, per source: stats of
    predicted and measured seconds (a grouped product as that many products); and a row per product."""
    from calibrate import fp8_products
    from profiler.dtypes import FP8

    gpu, products = fp8_products.load()
    cm = cm if cm is not None else shipped_profile(gpu)
    rows = [{"source": p.source, "groups": p.groups, "params": {"M": p.m, "N": p.n, "K": p.k}, "measured_s": p.time_s,
             "published_profile_s": p.groups * cm.compute_time_s("linear", "fwd", {"M": p.m, "N": p.n, "K": p.k}, FP8)}
            for p in products]
    out = {}
    for source in dict.fromkeys(r["source"] for r in rows):
        predicted, measured = (np.array([r[k] for r in rows if r["source"] == source])
                               for k in ("published_profile_s", "measured_s"))
        out[source] = {**stats(predicted, measured), "profile": PROFILES.get(gpu, gpu),
                       "least_accuracy": float(np.min(gf.accuracy(predicted, measured)))}
    return out, rows


def shipped_profile(gpu: str):
    """The cost model of the GPU's shipped profile (PROFILES), or None."""
    from predictor.api import load_cost_model

    return load_cost_model(PROFILES[gpu])[0] if gpu in PROFILES else None


def figures(summary: dict, fp8: dict | None = None) -> list[Figure]:
    out = []
    for source, s in (fp8 or {}).items():
        out += [Figure(f"{s['profile']} FP8 products against {source}'s measured ({s['rows']}, held out): "
                       f"mean accuracy", round(100 * s["mean_accuracy"], 2), "%"),
                Figure(f"... {source}: least accuracy", round(100 * s["least_accuracy"], 2), "%")]
    for gpu, by_dtype in summary.items():
        for dtype, s in by_dtype.items():
            label = f"{gpu} {dtype}"
            out += [Figure(f"{label}: held-out median accuracy (DeepBench's target >= {100 * TARGET_MEDIAN:g})",
                           round(100 * s["held_out"]["median_accuracy"], 2), "%"),
                    Figure(f"{label}: held-out mean accuracy (DeepBench's target >= {100 * TARGET_MEAN:g})",
                           round(100 * s["held_out"]["mean_accuracy"], 2), "%"),
                    Figure(f"{label}: in-sample median accuracy", round(100 * s["in_sample"]["median_accuracy"], 2),
                           "%")]
            if s["published_profile"]:
                out.append(Figure(f"{label}: {PROFILES[gpu]} median accuracy (reads this table: in-sample)",
                                  round(100 * s["published_profile"]["median_accuracy"], 2), "%"))
    return out


def run(args) -> int:
    summary, all_rows = {}, []
    for path in args.files or DATA_FILES:
        gpu, by_dtype = load(path)
        cm = shipped_profile(gpu)
        for dtype, samples in by_dtype.items():
            summary.setdefault(gpu, {})[dtype], rows = evaluate(gpu, dtype, samples, cm)
            all_rows += rows
    fp8, fp8_rows = fp8_products()
    all_rows += fp8_rows
    args.results.mkdir(parents=True, exist_ok=True)
    write_atomic(args.results / f"{NAME}-rows.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in all_rows))
    if args.json:  # stdout holds the JSON alone
        with contextlib.redirect_stdout(sys.stderr):
            record(NAME, figures(summary, fp8), args.results)
        print(json.dumps({**{g: {d: {k: v for k, v in s.items() if k != "constants"} for d, s in by.items()}
                             for g, by in summary.items()}, "fp8": fp8}, indent=1, sort_keys=True))
        return 0
    path = record(NAME, figures(summary, fp8), args.results)
    print(f"rows {args.results / (NAME + '-rows.jsonl')}; figures {path}")
    return 0
