"""Per-sample and per-step cost, measured and predicted, from runs that differ only in batch size.

A step of a fixed model, layout, precision, framework and machine takes about t(n) = a + b n seconds at n samples
per device: b is the marginal cost of a sample (the kernels that grow with the batch), a what a step costs whatever
its batch in that range (optimizer update, gradient reduction, host dispatch of short kernels, and any kernel
efficiency lost at the smaller batch). Fitting both lines, to the measured and to the predicted times of the same
runs, says which of the two a prediction gets wrong: one accuracy figure cannot (a too-fast kernel and a too-slow
fixed cost cancel at one batch size). A series is every run sharing everything but the batch, with at least two
batch sizes; its line is the least-squares fit over its runs. Used by the published reports
(predictor.published.batch_series) and by `predictor validate`'s suite report (`suite_series`).
docs/validation.md ("Per sample and per step").
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Iterable, NamedTuple, Sequence

#: series listed one by one in a text report (the JSON has them all)
LISTED = 12


class Point(NamedTuple):
    """One run of a series: what identifies the series, its label fields, samples per device, seconds."""

    key: tuple
    labels: dict
    samples: float
    measured_s: float
    predicted_s: float
    id: str


def line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (x, y) points with at least two distinct x."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        raise ValueError("a line needs two distinct x")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def fit(points: Iterable[Point]) -> list[dict]:
    """One record per series (module docstring): its labels, runs and batches, and the measured and predicted lines:
    `*_per_sample_s` (slope b), `*_per_step_s` (intercept a), per_sample_ratio = predicted b / measured b (None
    when the measured line does not rise)."""
    groups: dict[tuple, list[Point]] = defaultdict(list)
    for p in points:
        groups[p.key].append(p)
    out = []
    for rows in groups.values():
        if len({p.samples for p in rows}) < 2:
            continue
        rows.sort(key=lambda p: (p.samples, p.id))
        a_m, b_m = line([(p.samples, p.measured_s) for p in rows])
        a_p, b_p = line([(p.samples, p.predicted_s) for p in rows])
        out.append({**rows[0].labels, "rows": [p.id for p in rows], "samples_per_gpu": [p.samples for p in rows],
                    "measured_per_sample_s": b_m, "predicted_per_sample_s": b_p,
                    "measured_per_step_s": a_m, "predicted_per_step_s": a_p,
                    "per_sample_ratio": b_p / b_m if b_m > 0 else None})
    return sorted(out, key=lambda s: (s["group"], s["name"], s["rows"][0]))


def render(series: Sequence[dict]) -> list[str]:
    """Text lines: per group (machine and dtype) the medians, then the first LISTED series; none without series."""
    if not series:
        return []
    lines = ["\nper sample and per step (runs differing only in batch; t = a + b n fitted to measured and predicted):"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for s in series:
        groups[s["group"]].append(s)
    for name, rows in sorted(groups.items()):
        ratios = [s["per_sample_ratio"] for s in rows if s["per_sample_ratio"] is not None]
        gap = statistics.median(s["predicted_per_step_s"] - s["measured_per_step_s"] for s in rows)
        lines.append(f"  {name}: {len(rows)} series, median predicted / measured per sample "
                     + (f"{statistics.median(ratios):.2f}x" if ratios else "-")
                     + f", median per-step gap (predicted - measured) {gap * 1e3:+.3g} ms")
    for s in series[:LISTED]:
        ratio = s["per_sample_ratio"]
        lines.append(f"  {s['name']} n={','.join(f'{n:g}' for n in s['samples_per_gpu'])}: per sample "
                     f"{s['predicted_per_sample_s'] * 1e3:.3g} / {s['measured_per_sample_s'] * 1e3:.3g} ms"
                     + (f" ({ratio:.2f}x)" if ratio is not None else "")
                     + f", per step {s['predicted_per_step_s'] * 1e3:.3g} / {s['measured_per_step_s'] * 1e3:.3g} ms"
                     " (predicted / measured)")
    if len(series) > LISTED:
        lines.append(f"  ... and {len(series) - LISTED} more series (JSON: batch_series)")
    return lines


def markdown(series: Sequence[dict]) -> list[str]:
    """A report section: every series as a table row (none without series)."""
    if not series:
        return []
    return ["## Per sample and per step", "",
            "Rows that differ only in batch form a series; t = a + b n fitted to the measured and to the predicted "
            "times separates the per-sample cost b (kernels) from the per-step cost a (what a step costs whatever "
            "its batch): docs/validation.md, \"Per sample and per step\".", "",
            "| series | samples per GPU | per sample, predicted / measured ms | ratio | per step, predicted / measured ms |",
            "|---|---|---:|---:|---:|",
            *[f"| {s['name']} | {', '.join(f'{n:g}' for n in s['samples_per_gpu'])} | "
              f"{s['predicted_per_sample_s'] * 1e3:.3g} / {s['measured_per_sample_s'] * 1e3:.3g} | "
              + (f"{s['per_sample_ratio']:.2f}" if s["per_sample_ratio"] is not None else "-")
              + f" | {s['predicted_per_step_s'] * 1e3:.3g} / {s['measured_per_step_s'] * 1e3:.3g} |" for s in series],
            ""]


def suite_series(rows: Iterable[dict]) -> list[dict]:
    """The series of `predictor validate` records (JSONL rows with a prediction and a measurement): same model,
    knobs, strategy, devices, precision and settings, batch per device varied."""
    points = []
    for r in rows:
        if not (r.get("predicted_time_s") and r.get("measured_time_s") and r.get("batch_per_device")):
            continue
        knobs = tuple(sorted((k, str(v)) for k, v in (r.get("knobs") or {}).items()))
        key = (r["model"], knobs, r["label"], r["devices"], r["dtype"], r.get("amp"), r.get("cudnn_benchmark"),
               r.get("micro_batches"), r.get("recompute_segments"), r.get("offload"))
        amp = f" amp {r['amp']}" if r.get("amp") else ""
        labels = {"group": f"{r['dtype']}{amp}", "name": f"{r['model']} {r['label']} {r['dtype']}{amp} x{r['devices']}"
                  + (" cudnn-search" if r.get("cudnn_benchmark") else "")}
        points.append(Point(key, labels, float(r["batch_per_device"]), r["measured_time_s"], r["predicted_time_s"],
                            r.get("scenario") or r["label"]))
    return fit(points)
