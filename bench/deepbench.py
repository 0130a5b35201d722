"""GPU kernel model held out by application on DeepBench's measured kernels (targets: median >= 90%, mean >= 85%).

For every GPU and dtype of the DeepBench workbooks (default: calibrate/data/deepbench; or any DeepBench workbook
or text output given as FILE, text with --gpu naming its GPU), the GPU kernel model is fitted to every
application's GEMMs and convolutions but one and predicts that one's; each family's median and mean held-out
accuracy are the figures, in-sample beside them. Writes results/deepbench.json, results/deepbench-rows.jsonl and
docs/deepbench.md; --json prints {gpu: {dtype: {family: {rows, median_accuracy, mean_accuracy}}}}. A shape's
application is read from any file that names it, the carried ones among them (deepbench_kernels.read_labelled).
Where a sheet records cuDNN's forward algorithm, the regime the model infers from the shape is compared with it.

    python -m bench deepbench [FILE...] [--gpu NAME] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np

from bench import describe
from calibrate.monotone_ceiling import monotone_ceiling
from bench.record import REPO, Figure, add_results_flag, record
from calibrate import gpu_kernel_fit as gf
from calibrate import gpu_kernels as gk
from calibrate import gpu_specs
from calibrate.deepbench_kernels import WORKBOOKS, read_labelled
from profiler.errors import UserError
from profiler.outputs import write_atomic

NAME = "deepbench"
DEFAULT_FILES = list(WORKBOOKS)
DOCS = REPO / "docs" / "deepbench.md"
TARGET_MEDIAN, TARGET_MEAN = 0.90, 0.85
WORST = 5  # shapes listed per GPU, dtype and family


def cudnn_regime(name: Optional[str]) -> Optional[str]:
    """The model's algorithm (gk.ALGORITHMS) for a cuDNN forward algorithm name as DeepBench records it (its V100
    sheet truncates some: "LICIT_PRECOMP_GEMM"); None for none or an unknown one."""
    name = (name or "").upper()
    for marker, regime in (("WINOGRAD_NONFUSED", "winograd"), ("WINOGRAD", "winograd_fused"), ("FFT", "fft"),
                           ("GEMM", "implicit_gemm")):
        if marker in name:
            return regime
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    describe(parser, __doc__)
    parser.add_argument("files", nargs="*", metavar="FILE", type=Path,
                        help="DeepBench workbooks (.xlsx) or text output (default: the workbooks the repository carries)")
    parser.add_argument("--gpu", default=None, metavar="NAME",
                        help="the GPU text output ran on (a workbook names its own in its Specs sheet)")
    parser.add_argument("--json", action="store_true", help="print {gpu: {dtype: {family: figures}}} as JSON")
    parser.add_argument("--docs", type=Path, default=DOCS, metavar="PATH", help="the generated tables (default: %(default)s)")
    add_results_flag(parser)


def load(files: list[Path], gpu: Optional[str] = None
         ) -> dict[tuple[str, str], list[tuple[gf.KernelSample, Optional[str]]]]:
    """(GPU name, dtype) -> [(sample, math mode)] of every GEMM and convolution row, labelled by application
    (calibrate.deepbench_kernels.read_labelled: input-layer backward-data left out); `gpu` names the GPU of files
    that name none (text output)."""
    groups: dict[tuple[str, str], list] = defaultdict(list)  # (sample, math, cuDNN's recorded forward algorithm)
    for path, samples, run in read_labelled(files, carried=True):
        if run.gpu and gpu and gpu_specs.find_spec(run.gpu) != gpu_specs.find_spec(gpu):
            raise UserError(f"--gpu {gpu!r}: {path} names the GPU {run.gpu!r}")
        name = run.gpu or gpu
        if not name:
            raise UserError(f"{path}: names no GPU (no Specs sheet 'GPU Model'); pass --gpu NAME, the kernel model "
                            "needs its datasheet")
        for s in samples:
            call = gk.as_kernel_call(s.benchmark, s.variant, s.params)
            if call is None:
                continue
            sample = gf.KernelSample(*call, s.dtype, float(np.median(s.times_s)),
                                     s.extra.get("application") or "unlabelled")
            groups[(name, s.dtype)].append((sample, s.extra.get("math"), s.extra.get("algorithm")))
    return groups


def evaluate(gpu: str, dtype: str, rows: list) -> tuple[list[dict], dict]:
    """Per row: measured, in-sample and held-out predictions; and the fitted constants."""
    spec = gpu_specs.find_spec(gpu)
    if spec is None:
        raise UserError(f"GPU {gpu!r} is not in calibrate/data/gpus.yaml: add its SMs, peaks and bandwidth")
    hardware, samples, _, _ = gf.with_math(spec, dtype, [(sample, math) for sample, math, _ in rows])
    values = gf.fit(samples, hardware)
    fitted = gf.predict(values, samples, hardware)
    held = gf.leave_one_group_out(samples, hardware)
    out = [{"gpu": gpu, "dtype": dtype, "family": gk.family(s.op, s.pass_), "application": s.group,
            "params": s.params, "measured_s": s.time_s, "in_sample_s": float(f), "held_out_s": float(h),
            "algorithm": gk.chosen_algorithm(values, hardware, s.op, s.pass_, s.params, s.dtype),
            "cudnn_algorithm": recorded}
           for s, f, h, (_, _, recorded) in zip(samples, fitted, held, rows)]
    return out, values


def summarise(rows: list[dict], key: str) -> dict:
    kept = [r for r in rows if np.isfinite(r[key])]
    acc = gf.accuracy(np.array([r[key] for r in kept]), np.array([r["measured_s"] for r in kept]))
    return {"rows": len(kept), "median_accuracy": float(np.median(acc)) if kept else None,
            "mean_accuracy": float(np.mean(acc)) if kept else None}


def size_key(family: str, p: dict) -> tuple:
    """(configuration, sizes) of a row for the monotone ceiling: a GEMM's transposes and (M, N, K); a convolution's
    kernel, stride and padding and (N, C, D, H, W, F) (D = 1 for a 2-D one)."""
    if family.startswith("gemm"):
        return (bool(p.get("transpose_a")), bool(p.get("transpose_b"))), (p["M"], p["N"], p["K"])
    return ((tuple(p["kernel"]), tuple(p["stride"]), tuple(p["padding"])),
            (p["N"], p["C"], p.get("D", 1), p["H"], p["W"], p["F"]))


def ceiling(rows: list[dict]) -> dict:
    """The cell's monotone ceiling (calibrate.monotone_ceiling): median and mean accuracy of the best predictions that
    never fall as a shape grows, over the rows with a measured time."""
    kept = [r for r in rows if np.isfinite(r["measured_s"]) and r["measured_s"] > 0]
    acc = monotone_ceiling([size_key(r["family"], r["params"]) for r in kept], [r["measured_s"] for r in kept])
    return {"rows": len(kept), "median_accuracy": float(np.median(acc)) if kept else None,
            "mean_accuracy": float(np.mean(acc)) if kept else None}


def table(all_rows: list[dict]) -> dict:
    out: dict = {}
    for r in all_rows:
        out.setdefault(r["gpu"], {}).setdefault(r["dtype"], {}).setdefault(r["family"], []).append(r)
    return {g: {d: {f: {"held_out": summarise(rs, "held_out_s"), "in_sample": summarise(rs, "in_sample_s"),
                        "monotone_ceiling": ceiling(rs)}
                    for f, rs in fams.items()} for d, fams in dts.items()} for g, dts in out.items()}


def regime_agreement(all_rows: list[dict]) -> dict:
    """(GPU, dtype) -> {rows, agree, pairs: {(recorded regime, model's): count}} over the forward convolutions whose
    sheet records cuDNN's choice (cudnn_regime), the model's from its in-sample fit with the algorithm search."""
    out: dict = {}
    for r in all_rows:
        recorded = cudnn_regime(r.get("cudnn_algorithm"))
        if r["family"] != "conv2d/fwd" or recorded is None:
            continue
        cell = out.setdefault((r["gpu"], r["dtype"]), {"rows": 0, "agree": 0, "pairs": defaultdict(int)})
        cell["rows"] += 1
        cell["agree"] += recorded == r["algorithm"]
        cell["pairs"][(recorded, r["algorithm"])] += 1
    return out


def _shape(family: str, p: dict) -> str:
    if family.startswith("gemm"):
        t = ("T" if p.get("transpose_a") else "N") + ("T" if p.get("transpose_b") else "N")
        return f"{p['M']}x{p['N']}x{p['K']} {t}"
    (r, s), (sh, _), (ph, _) = p["kernel"], p["stride"], p["padding"]
    return f"N{p['N']} C{p['C']} {p['H']}x{p['W']} F{p['F']} {r}x{s} s{sh} p{ph}"


def markdown(summary: dict, all_rows: list[dict], files: list[Path], agreement: dict) -> str:
    lines = ["<!-- generated by `python -m bench deepbench`: do not edit by hand -->", "",
             "# DeepBench kernels predicted by the GPU kernel model, held out by application", "",
             f"Files: {', '.join(p.name for p in files)}. Each row's prediction comes from a fit to every other "
             "application's rows of the same GPU and dtype (held out); the in-sample column fits all rows. "
             "Accuracy = 1 - |predicted - measured| / measured. The monotone ceiling is the best mean accuracy of "
             "any prediction that never falls as a shape grows (every size at least as large, the same transposes "
             "or kernel, stride and padding), fitted to all rows: what the measurements themselves allow such a "
             "model (calibrate/monotone_ceiling.py). Method: docs/gpu-kernels.md.", "",
             "| GPU | dtype | family | rows | held-out median | held-out mean | in-sample median | in-sample mean | "
             "monotone ceiling (mean) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    for gpu, dts in sorted(summary.items()):
        for dtype, fams in sorted(dts.items()):
            for family in gk.FAMILIES:
                if family in fams:
                    h, i = fams[family]["held_out"], fams[family]["in_sample"]
                    c = fams[family]["monotone_ceiling"]
                    lines.append(f"| {gpu} | {dtype} | {family} | {h['rows']} | {pct(h['median_accuracy'])} | "
                                 f"{pct(h['mean_accuracy'])} | {pct(i['median_accuracy'])} | "
                                 f"{pct(i['mean_accuracy'])} | {pct(c['mean_accuracy'])} |")
    lines += ["", f"## Worst held-out shapes ({WORST} per GPU, dtype and family)", "",
              "| GPU | dtype | family | shape | application | measured us | predicted us | predicted / measured | algorithm |",
              "|---|---|---|---|---|---:|---:|---:|---|"]
    groups = defaultdict(list)
    for r in all_rows:
        if np.isfinite(r["held_out_s"]):
            groups[(r["gpu"], r["dtype"], r["family"])].append(r)
    for (gpu, dtype, family), rs in sorted(groups.items()):
        for r in sorted(rs, key=lambda r: -abs(np.log(r["held_out_s"] / r["measured_s"])))[:WORST]:
            lines.append(f"| {gpu} | {dtype} | {family} | {_shape(family, r['params'])} | {r['application']} | "
                         f"{r['measured_s'] * 1e6:.0f} | {r['held_out_s'] * 1e6:.0f} | "
                         f"{r['held_out_s'] / r['measured_s']:.2f} | {r['algorithm'] or '-'} |")
    if agreement:
        lines += ["", "## Forward algorithm: the regime the model infers against cuDNN's recorded choice", "",
                  "The model's choice comes from its in-sample fit with cuDNN's search; cuDNN's from the sheet "
                  "(IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM and GEMM as implicit_gemm, WINOGRAD as winograd_fused, "
                  "WINOGRAD_NONFUSED as winograd, FFT and FFT_TILING as fft).", "",
                  "| GPU | dtype | rows | same regime | cuDNN -> model (rows) |", "|---|---|---:|---:|---|"]
        for (gpu, dtype), cell in sorted(agreement.items()):
            pairs = ", ".join(f"{a} -> {b} ({n})" for (a, b), n in sorted(cell["pairs"].items()) if a != b)
            lines.append(f"| {gpu} | {dtype} | {cell['rows']} | {pct(cell['agree'] / cell['rows'])} | "
                         f"{pairs or '-'} |")
    return "\n".join(lines) + "\n"


def figures(summary: dict, agreement: Optional[dict] = None) -> list[Figure]:
    """Headline figures with the targets (the worst cell's median and mean, how many cells meet both), then every
    cell's held-out median and mean without a target (the README shows only figures with one), and the share of
    forward convolutions whose inferred regime is cuDNN's recorded one."""
    cells = [(f"{gpu} {dtype} {family}", fams[family]["held_out"]) for gpu, dts in sorted(summary.items())
             for dtype, fams in sorted(dts.items()) for family in gk.FAMILIES if family in fams]
    medians = [h["median_accuracy"] for _, h in cells if h["median_accuracy"] is not None]
    means = [h["mean_accuracy"] for _, h in cells if h["mean_accuracy"] is not None]
    met = sum(h["median_accuracy"] is not None and h["median_accuracy"] >= TARGET_MEDIAN
              and h["mean_accuracy"] >= TARGET_MEAN for _, h in cells)
    out = [Figure("held-out median accuracy, worst GPU x dtype x family", _pct(min(medians, default=None)), "%",
                  f">= {100 * TARGET_MEDIAN:g}"),
           Figure("held-out mean accuracy, worst GPU x dtype x family", _pct(min(means, default=None)), "%",
                  f">= {100 * TARGET_MEAN:g}"),
           Figure("held-out median accuracy, mean over the cells", _pct(float(np.mean(medians)) if medians else None),
                  "%"),
           Figure("cells meeting both targets", met, f"of {len(cells)}")]
    ceilings = [fams[family]["monotone_ceiling"]["mean_accuracy"] for dts in summary.values() for fams in dts.values()
                for family in gk.FAMILIES if family in fams]
    ceilings = [c for c in ceilings if c is not None]
    if ceilings:  # what the measurements allow a model whose time never falls as a shape grows (module docstring)
        out.append(Figure("monotone ceiling of the mean accuracy, worst GPU x dtype x family",
                          _pct(min(ceilings)), "%"))
    for label, h in cells:
        out.append(Figure(f"{label}: held-out median accuracy", _pct(h["median_accuracy"]), "%"))
        out.append(Figure(f"{label}: held-out mean accuracy", _pct(h["mean_accuracy"]), "%"))
    rows = sum(c["rows"] for c in (agreement or {}).values())
    if rows:
        agree = sum(c["agree"] for c in agreement.values())
        out.append(Figure("forward convolutions whose inferred algorithm regime is cuDNN's recorded one",
                          _pct(agree / rows), "%"))
    return out


def _pct(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(100 * value, 2)


def run(args) -> int:
    files = list(args.files) or DEFAULT_FILES
    if not files:
        raise UserError("no DeepBench files given and none carried in calibrate/data/deepbench")
    all_rows: list[dict] = []
    for (gpu, dtype), rows in sorted(load(files, args.gpu).items()):
        evaluated, _ = evaluate(gpu, dtype, rows)
        all_rows += evaluated
    summary, agreement = table(all_rows), regime_agreement(all_rows)
    write_atomic(args.docs, markdown(summary, all_rows, files, agreement))
    args.results.mkdir(parents=True, exist_ok=True)
    write_atomic(args.results / f"{NAME}-rows.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in all_rows))
    if args.json:  # stdout holds the JSON alone; the figures' listing goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            record(NAME, figures(summary, agreement), args.results)
        print(json.dumps({g: {d: {f: v["held_out"] for f, v in fams.items()} for d, fams in dts.items()}
                          for g, dts in summary.items()}, indent=1, sort_keys=True))
        return 0
    path = record(NAME, figures(summary, agreement), args.results)
    print(f"rows: {args.results / (NAME + '-rows.jsonl')}; tables: {args.docs}; figures: {path}")
    return 0
