"""Scores of a published validation: accuracy per row and grouped, scaling-efficiency error, JSON and text.

Scaling efficiency isolates the communication model from the single-GPU compute: within a *series* (same
source, model, precision, framework, parallelism, data, system and batch per GPU), eff(p) = throughput(p) / ((p / p0) *
throughput(p0)) with p0 the smallest GPU count of the series, measured and predicted alike; with the batch
per GPU fixed this is t(p0) / t(p). Its error is
100 * |eff_pred(p) - eff_meas(p)| points, over the rows with p > p0.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Callable, Iterable, Optional, Sequence

from predictor.plots import predicted_vs_measured
from predictor.published import batch_series
from predictor.published.formatting import pct
from predictor.published.rowmap import Skipped
from predictor.published.validate import BUCKETS, RowResult


def series_key(r: RowResult) -> tuple:
    run = r.run
    return (run.source, r.setup.model, r.setup.knobs, r.setup.dtype, run.framework, run.parallelism, run.data,
            r.setup.profile, run.batch_per_gpu)


def scaling_errors(results: Sequence[RowResult], predicted: Optional[Callable[[RowResult], float]] = None
                   ) -> dict[str, float]:
    """Row id -> scaling-efficiency error in points (module docstring), for rows beyond their series' base;
    `predicted`: per-row predicted seconds of another model (e.g. leave-one-source-out; default the analytical)."""
    predicted = predicted or (lambda r: r.predicted_s)
    series: dict[tuple, list[RowResult]] = defaultdict(list)
    for r in results:
        series[series_key(r)].append(r)
    out = {}
    for rows in series.values():
        base = min(rows, key=lambda r: r.run.num_gpus)
        for r in rows:
            if r.run.num_gpus <= base.run.num_gpus:
                continue
            # throughput = batch_per_gpu * p / t with one batch per GPU in a series, so eff(p) = t(p0) / t(p)
            eff_meas = base.measured_s / r.measured_s
            eff_pred = predicted(base) / predicted(r)
            out[r.run.id] = 100.0 * abs(eff_pred - eff_meas)
    return out


def _group(results: Iterable[RowResult], key: Callable[[RowResult], str],
           predicted: Optional[Callable[[RowResult], float]] = None) -> dict[str, dict]:
    groups: dict[str, list[float]] = defaultdict(list)
    for r in results:
        p = predicted(r) if predicted else r.predicted_s
        groups[key(r)].append(1.0 - abs(p - r.measured_s) / r.measured_s)
    return {k: {"rows": len(v), "accuracy": statistics.fmean(v)} for k, v in sorted(groups.items())}


def summarise(results: Sequence[RowResult], skipped: Sequence[Skipped], *,
              extra_predictions: Optional[dict[str, Callable[[RowResult], float]]] = None) -> dict:
    """The report as a JSON-ready dict. extra_predictions: name -> per-row predicted seconds of another model
    (e.g. leave-one-source-out), scored the same way next to the analytical one."""
    scaling = scaling_errors(results)
    order = [name for _, _, name in BUCKETS]
    by_bucket = _group(results, lambda r: r.bucket)
    report = {
        "overall_accuracy": statistics.fmean(r.accuracy for r in results) if results else None,
        "rows_validated": len(results),
        "rows_skipped": len(skipped),
        "by_gpu_bucket": {b: by_bucket[b] for b in order if b in by_bucket},
        "by_source": _group(results, lambda r: r.run.source),
        "by_system": _group(results, lambda r: r.setup.system),
        "by_framework": _group(results, lambda r: r.setup.framework),
        "scaling_efficiency_error_points": _scaling_summary(scaling),
        "interval_coverage": _coverage(results),
        "framework_blind_ceiling": framework_blind_ceiling(results),
        "framework_blind_ceiling_by_gpu_bucket": framework_blind_ceiling(results, lambda r: r.bucket),
        "batch_series": batch_series.batch_series(results),
        "rows": [_row(r, scaling.get(r.run.id), extra_predictions) for r in results],
        "skipped": [{"id": s.run.id, "source": s.run.source, "reason": s.reason} for s in skipped],
    }
    for name, fn in (extra_predictions or {}).items():
        report[name] = {
            "overall_accuracy": statistics.fmean(1 - abs(fn(r) - r.measured_s) / r.measured_s for r in results)
            if results else None,
            "by_gpu_bucket": {b: v for b, v in _group(results, lambda r: r.bucket, fn).items()},
            "by_source": _group(results, lambda r: r.run.source, fn),
            "by_system": _group(results, lambda r: r.setup.system, fn),
            "by_framework": _group(results, lambda r: r.setup.framework, fn),
            "scaling_efficiency_error_points": _scaling_summary(scaling_errors(results, fn))}
    return report


def _scaling_summary(scaling: dict[str, float]) -> dict:
    return {"rows": len(scaling), "median": statistics.median(scaling.values()) if scaling else None,
            "mean": statistics.fmean(scaling.values()) if scaling else None}


def framework_blind_ceiling(results: Sequence[RowResult], by: Callable[[RowResult], str] = lambda r: r.run.source
                            ) -> dict:
    """Per source (or per `by(row)`), the best mean accuracy any predictor that ignores the software framework could
    reach: rows that differ only in framework (same system, model, knobs, dtype, GPUs, batch and plan) must share
    one prediction, and a group's best shared p is the weighted median of its measured times, weights 1/measured
    (it minimises sum |p - m| / m). Rows without such a twin count at 100%. docs/validation.md."""
    groups: dict[tuple, list[RowResult]] = defaultdict(list)
    for r in results:
        s = r.setup
        groups[(r.run.source, s.profile, s.model, s.knobs, s.dtype, r.run.num_gpus, r.run.batch_per_gpu,
                tuple(sorted(dict(s.plan).items())))].append(r)
    best: dict[str, list[float]] = defaultdict(list)
    twins: dict[str, int] = defaultdict(int)
    for rows in groups.values():
        ordered = sorted(r.measured_s for r in rows)
        weights = [1 / m for m in ordered]
        half, seen = sum(weights) / 2, 0.0
        p = next(m for m, w in zip(ordered, weights) if (seen := seen + w) >= half)
        for r in rows:
            best[by(r)].append(1 - abs(p - r.measured_s) / r.measured_s)
            twins[by(r)] += len(rows) > 1
    return {name: {"rows": len(acc), "rows_with_twins": twins[name], "ceiling": statistics.fmean(acc)}
            for name, acc in sorted(best.items())}


def ceiling_sentence(report: dict) -> str:
    """One sentence on the sources and GPU buckets whose rows have framework twins (framework_blind_ceiling); ''
    when none do."""
    parts = []
    for key, what in (("framework_blind_ceiling", "source"), ("framework_blind_ceiling_by_gpu_bucket", "GPUs")):
        bounded = {k: v for k, v in report.get(key, {}).items() if v["rows_with_twins"]}
        if bounded:
            parts.append(f"by {what}: " + ", ".join(
                f"{k} {pct(v['ceiling'])} ({v['rows_with_twins']} of {v['rows']} rows have twins)"
                for k, v in bounded.items()))
    if not parts:
        return ""
    return ("Framework-blind ceiling (the best mean accuracy of any prediction that ignores the framework: rows that "
            "differ only in framework share one prediction), " + "; ".join(parts) + ".")


def subset_summary(rows: Sequence[RowResult], predictions: dict[str, Callable[[RowResult], float]]) -> dict:
    """Mean accuracy of each named prediction over the same rows, overall and by system (a column of the report
    that covers some rows only, e.g. the DeepBench-kernel profiles' 1-GPU rows)."""
    score = lambda fn, rs: statistics.fmean(1 - abs(fn(r) - r.measured_s) / r.measured_s for r in rs)  # noqa: E731
    systems = sorted({r.setup.system for r in rows})
    return {"rows": len(rows),
            "accuracy": {name: score(fn, rows) if rows else None for name, fn in predictions.items()},
            "by_system": {system: {"rows": len(sub), **{name: score(fn, sub) for name, fn in predictions.items()}}
                          for system in systems
                          for sub in [[r for r in rows if r.setup.system == system]]}}


def _coverage(results: Sequence[RowResult]) -> dict:
    inside = [r.interval_s[0] <= r.measured_s <= r.interval_s[1] for r in results if not math.isnan(r.interval_s[0])]
    return {"rows": len(inside), "share_inside": sum(inside) / len(inside) if inside else None}


def _row(r: RowResult, scaling: Optional[float], extra) -> dict:
    s = r.setup
    out = {"id": r.run.id, "source": r.run.source, "model": s.model, "dtype": s.dtype, "optimizer": s.optimizer,
           "framework": s.framework, "system": s.system, "gpus": r.run.num_gpus,
           "nodes": r.run.nodes, "batch_per_gpu": r.run.batch_per_gpu, "measured_s": r.measured_s,
           "predicted_s": r.predicted_s, "interval_s": list(r.interval_s), "accuracy": r.accuracy,
           "gpu_bucket": r.bucket, "scaling_error_points": scaling, "fits_in_memory": r.fits, "terms": r.terms,
           "assumptions": list(s.assumptions), "url": r.run.url}
    for name, fn in (extra or {}).items():
        out[f"{name}_predicted_s"] = fn(r)
    return out



def render_text(report: dict) -> str:
    """A short plain-text summary (the JSON has every row)."""
    extra = [k for k in report if isinstance(report[k], dict) and "by_gpu_bucket" in report[k] and k != "by_gpu_bucket"]
    lines = [f"published validation: {report['rows_validated']} rows predicted, {report['rows_skipped']} skipped",
             f"mean accuracy (analytical): {pct(report['overall_accuracy'])}"
             + "".join(f"   {k}: {pct(report[k]['overall_accuracy'])}" for k in extra)]
    se = report["scaling_efficiency_error_points"]
    if se["rows"]:
        held = [(k, report[k]["scaling_efficiency_error_points"]) for k in extra
                if report[k].get("scaling_efficiency_error_points", {}).get("rows")]
        lines.append(f"scaling-efficiency error: median {se['median']:.1f} points, mean {se['mean']:.1f} over {se['rows']} rows"
                     + "".join(f"; {k}: median {v['median']:.1f}, mean {v['mean']:.1f}" for k, v in held))
    cov = report["interval_coverage"]
    if cov["rows"]:
        lines.append(f"measured time inside the prediction interval: {pct(cov['share_inside'])} of {cov['rows']} rows")
    loso_cov = report.get("interval_coverage_loso")
    if loso_cov and loso_cov["rows"]:
        alone = loso_cov.get("model_error_share_inside")
        lines.append(f"inside the {pct(loso_cov['nominal'])} interval (model error x at-scale terms), "
                     f"leave-one-source-out: {pct(loso_cov['share_inside'])} of {loso_cov['rows']} rows"
                     + (f" (model error alone: {pct(alone)})" if alone is not None else ""))
    kernels = report.get("deepbench_kernels")
    if kernels and kernels["rows"]:
        acc = kernels["accuracy"]
        lines.append(f"DeepBench-kernel profiles (nothing fitted to runs), {kernels['rows']} 1-GPU rows of their GPUs: "
                     + ", ".join(f"{name} {pct(value)}" for name, value in acc.items()))
    for title, key in (("GPU count", "by_gpu_bucket"), ("source", "by_source"), ("system", "by_system"),
                       ("framework regime", "by_framework")):
        lines.append(f"\nby {title}:")
        for name, g in report[key].items():
            cells = "".join(f"  {k} {pct(report[k][key][name]['accuracy'])}" for k in extra
                            if key in report[k] and name in report[k][key])
            lines.append(f"  {name:<28} rows {g['rows']:>4}   accuracy {pct(g['accuracy']):>7}{cells}")
    if ceiling_sentence(report):
        lines.append("\n" + ceiling_sentence(report))
    lines += batch_series.render_text(report)
    from predictor.published.megatron_papers import render_text as megatron_papers_text
    lines += megatron_papers_text(report)
    from predictor.published.moe_context_rows import render_text as moe_context_text
    lines += moe_context_text(report)
    reasons: dict[str, int] = defaultdict(int)
    for s in report["skipped"]:
        reasons[s["reason"]] += 1
    if reasons:
        lines.append("\nskipped:")
        lines += [f"  {n:>4}  {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    """Log-log scatter of predicted vs measured seconds per iteration, one colour per source."""
    groups: dict[str, list] = defaultdict(list)
    for r in report["rows"]:
        groups[r["source"]].append((r["measured_s"], r["predicted_s"]))
    predicted_vs_measured(groups, path, xlabel="measured s/iteration (published)", ylabel="predicted s/iteration",
                          title=f"published runs: mean accuracy {report['overall_accuracy']:.1%}", point_size=12)
