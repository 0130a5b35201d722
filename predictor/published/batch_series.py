"""Per-sample and per-step cost, measured and predicted, from published rows that differ only in batch size.

A step of a fixed model, layout, precision, framework and machine takes about t(n) = a + b n seconds at n samples
per GPU: b is the marginal cost of a sample (the GPU kernels that scale with the batch), a what a step costs
whatever its batch (optimizer update, gradient reduction, host dispatch of small kernels, input pipeline set-up).
Fitting both lines, to the measured and to the predicted times of the same rows, says which of the two a
prediction gets wrong: an accuracy figure cannot (a too-fast kernel and a too-slow fixed cost cancel at one batch
size). A series is every row sharing everything but the batch, with at least two batch sizes; the line is the
least-squares fit over its rows. docs/validation.md ("Per sample and per step").
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Optional, Sequence

from predictor.published.validate import RowResult

#: plan fields that follow from the batch (the number of micro-batches stays in the key: a series varies the samples
#: each micro-batch holds, never how a step is split)
BATCH_PLAN_FIELDS = ("batch",)


def samples_per_gpu(r: RowResult) -> Optional[float]:
    """Samples per GPU per optimizer step: the row's stated per-GPU batch, else its global batch over its GPUs."""
    if r.run.batch_per_gpu:
        return float(r.run.batch_per_gpu)
    batch = r.run.extra.get("global_batch")
    return batch / r.run.num_gpus if isinstance(batch, (int, float)) and batch > 0 else None


def series_key(r: RowResult) -> tuple:
    """Everything of a row but its batch (the rows of one series share it)."""
    s = r.setup
    plan = tuple((k, v) for k, v in s.plan if k not in BATCH_PLAN_FIELDS)
    system = tuple(sorted((k, str(v)) for k, v in r.run.system.items()))  # one machine (a submission's name)
    return (r.run.source, s.model, s.knobs, s.dtype, s.optimizer, s.framework, s.stack, r.run.framework, r.run.data,
            system, s.profile, r.run.num_gpus, s.devices_per_node, plan, s.synthetic_data, s.seq_mix,
            s.memory_format, s.cuda_graphs)


def line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (x, y) points with at least two distinct x."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        raise ValueError("a line needs two distinct x")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def batch_series(results: Sequence[RowResult]) -> list[dict]:
    """One record per series (module docstring): its rows, batches, and the measured and predicted lines:
    `*_per_sample_s` (slope b), `*_per_step_s` (intercept a), and per_sample_ratio = predicted b / measured b."""
    groups: dict[tuple, list[tuple[float, RowResult]]] = defaultdict(list)
    for r in results:
        n = samples_per_gpu(r)
        if n is not None:
            groups[series_key(r)].append((n, r))
    out = []
    for rows in groups.values():
        if len({n for n, _ in rows}) < 2:
            continue
        rows.sort(key=lambda p: (p[0], p[1].run.id))
        a_m, b_m = line([(n, r.measured_s) for n, r in rows])
        a_p, b_p = line([(n, r.predicted_s) for n, r in rows])
        first = rows[0][1]
        out.append({"rows": [r.run.id for _, r in rows], "source": first.run.source, "model": first.setup.model,
                    "dtype": first.setup.dtype, "system": first.setup.profile.removesuffix(".published.yaml"),
                    "gpus": first.run.num_gpus, "framework": first.run.framework,
                    "synthetic_data": first.setup.synthetic_data,
                    "samples_per_gpu": [n for n, _ in rows],
                    "measured_per_sample_s": b_m, "predicted_per_sample_s": b_p,
                    "measured_per_step_s": a_m, "predicted_per_step_s": a_p,
                    "per_sample_ratio": b_p / b_m if b_m > 0 else None})
    return sorted(out, key=lambda s: (s["source"], s["system"], s["model"], s["dtype"], s["gpus"], s["rows"][0]))


#: series listed one by one in the text report (the JSON has them all)
LISTED = 12


def render_text(report: dict) -> list[str]:
    """The report's lines on its batch series (none when it has none): per machine and dtype the medians, then
    the first LISTED series."""
    series = report.get("batch_series") or []
    if not series:
        return []
    lines = ["\nper sample and per step (rows differing only in batch; t = a + b n fitted to measured and predicted):"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for s in series:
        groups[f"{s['system']} {s['dtype']}"].append(s)
    for name, rows in sorted(groups.items()):
        ratios = [s["per_sample_ratio"] for s in rows if s["per_sample_ratio"] is not None]
        gap = statistics.median(s["predicted_per_step_s"] - s["measured_per_step_s"] for s in rows)
        lines.append(f"  {name}: {len(rows)} series, median predicted / measured per sample "
                     + (f"{statistics.median(ratios):.2f}x" if ratios else "-")
                     + f", median per-step gap (predicted - measured) {gap * 1e3:+.3g} ms")
    for s in series[:LISTED]:
        ratio = s["per_sample_ratio"]
        lines.append(f"  {s['source']} {s['model']} {s['dtype']} {s['system']} x{s['gpus']} "
                     f"{s['framework'].split(' (')[0][:40]}{' synthetic' if s.get('synthetic_data') else ''} "
                     f"n={','.join(f'{n:g}' for n in s['samples_per_gpu'])}: per sample "
                     f"{s['predicted_per_sample_s'] * 1e3:.3g} / {s['measured_per_sample_s'] * 1e3:.3g} ms"
                     + (f" ({ratio:.2f}x)" if ratio is not None else "")
                     + f", per step {s['predicted_per_step_s'] * 1e3:.3g} / {s['measured_per_step_s'] * 1e3:.3g} ms"
                     " (predicted / measured)")
    if len(series) > LISTED:
        lines.append(f"  ... and {len(series) - LISTED} more series (JSON: batch_series)")
    return lines
