"""Accuracy of predictions against measured runs: per-run accuracy, mean per strategy and overall,
ranking agreement per scenario, the best setting (batch, precision, cuDNN's search) per model, a text table and a
PNG scatter, the per-sample and per-step lines of runs that differ only in batch (predictor.batch_series) and
the traced runs' device time by kind of kernel (predictor.kernel_breakdown).

accuracy = 1 - |predicted - measured| / measured (issue 6; ParaDL reports projection/empirical instead,
its tech report's Tables VIII-IX). A scenario is the set of runs sharing model, global batch, devices and dtype; the
ranking agrees when the strategy predicted fastest is the one measured fastest.
Rows are the JSONL records of `predictor validate` (fields label, scenario, predicted_time_s,
measured_time_s, ...).
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from calibrate.correction import accuracy
from predictor.batch_series import render as series_lines, suite_series
from predictor.kernel_breakdown import render as kernel_lines
from predictor.plots import predicted_vs_measured


def _predicted(rows):
    return [r for r in rows if r.get("predicted_time_s") and r.get("measured_time_s")]


def per_strategy_accuracy(rows) -> dict[str, tuple[float, int]]:
    """label -> (mean accuracy, runs)."""
    groups = defaultdict(list)
    for r in _predicted(rows):
        groups[r["label"]].append(accuracy(r["predicted_time_s"], r["measured_time_s"]))
    return {label: (statistics.fmean(values), len(values)) for label, values in sorted(groups.items())}


def per_strategy_memory_accuracy(rows) -> dict[str, float]:
    """label -> mean accuracy of the predicted peak memory (busiest device) against the measured peak."""
    groups = defaultdict(list)
    for r in rows:
        if r.get("predicted_memory_bytes") and r.get("measured_peak_memory_bytes"):
            groups[r["label"]].append(accuracy(r["predicted_memory_bytes"], r["measured_peak_memory_bytes"]))
    return {label: statistics.fmean(values) for label, values in groups.items()}


def _accuracies(rows) -> list[float]:
    return [accuracy(r["predicted_time_s"], r["measured_time_s"]) for r in _predicted(rows)]


def overall_accuracy(rows) -> float | None:
    values = _accuracies(rows)
    return statistics.fmean(values) if values else None


def least_accuracy(rows) -> float | None:
    values = _accuracies(rows)
    return min(values) if values else None


def _best(rows, group, name, cost) -> list[tuple]:
    """(group key, predicted best name, measured best name, runs) per group of predicted rows with >= 2 names:
    the row of least cost(row, "predicted_time_s") against the one of least cost(row, "measured_time_s")."""
    groups = defaultdict(list)
    for r in _predicted(rows):
        groups[group(r)].append(r)
    return [(key, name(min(members, key=lambda m: cost(m, "predicted_time_s"))),
             name(min(members, key=lambda m: cost(m, "measured_time_s"))), len(members))
            for key, members in sorted(groups.items()) if len({name(m) for m in members}) >= 2]


def ranking(rows) -> list[dict]:
    """Per scenario with >= 2 predicted runs: predicted best, measured best, agreement."""
    return [{"scenario": scenario, "predicted_best": pred, "measured_best": meas, "agree": pred == meas, "runs": n}
            for scenario, pred, meas, n in _best(rows, lambda r: r["scenario"], lambda r: r["label"],
                                                 lambda r, key: r[key])]


def setting_ranking(rows) -> list[dict]:
    """Per model and strategy with >= 2 predicted settings (batch, dtype, autocast, cuDNN's search): the setting
    predicted to train the most samples per second against the one measured so (what a user picks a run by). A
    row's scenario (RunConfig.scenario) is its model and knobs, then "/" and its settings."""
    return [{"model": model, "strategy": label, "predicted_best": pred, "measured_best": meas, "agree": pred == meas,
             "runs": n}
            for (model, label), pred, meas, n in _best(
                rows, lambda r: (r["scenario"].split("/", 1)[0], r["label"]), lambda r: r["scenario"].split("/", 1)[-1],
                lambda r, key: r[key] / r["batch"])]


def _fmt_s(value) -> str:
    return "-" if value is None else f"{value * 1e3:9.2f}"


def progress_line(row: dict) -> str:
    acc = f"{row['accuracy']:6.1%}" if row.get("accuracy") is not None else "   n/a"
    why = f"  ({row['prediction_error']})" if row.get("prediction_error") else ""
    return (f"  {row['label']:<18} {row['scenario']:<48} predicted {_fmt_s(row.get('predicted_time_s'))} ms  "
            f"measured {_fmt_s(row['measured_time_s'])} ms (IQR {row['measured_iqr_s'] * 1e3:.2f})  accuracy {acc}  "
            f"load {row['measured'].get('loadavg_1m', 0):.1f}{why}")


def render(rows) -> str:
    lines = [f"{'strategy':<18} {'scenario':<48} {'pred ms':>9} {'meas ms':>9} {'IQR ms':>7} {'acc':>7} "
             f"{'pred MB':>8} {'meas MB':>8}"]
    for r in rows:
        acc = f"{r['accuracy']:7.1%}" if r.get("accuracy") is not None else "    n/a"
        pm = f"{r['predicted_memory_bytes'] / 1e6:8.1f}" if r.get("predicted_memory_bytes") else "       -"
        lines.append(f"{r['label']:<18} {r['scenario']:<48} {_fmt_s(r.get('predicted_time_s'))} {_fmt_s(r['measured_time_s'])} "
                     f"{r['measured_iqr_s'] * 1e3:7.2f} {acc} {pm} {r['measured_peak_memory_bytes'] / 1e6:8.1f}")
    lines.append("")
    lines.append("mean accuracy per strategy (time; peak memory):")
    memory = per_strategy_memory_accuracy(rows)
    for label, (mean, n) in per_strategy_accuracy(rows).items():
        mem = f"{memory[label]:7.1%}" if label in memory else "    n/a"
        lines.append(f"  {label:<18} {mean:7.1%}  ({n} runs)   memory {mem}")
    overall = overall_accuracy(rows)
    least = least_accuracy(rows)
    lines.append(f"  {'overall':<18} {overall:7.1%}  (least {least:.1%})" if overall is not None
                 else "  overall: no predicted runs")
    ranks = ranking(rows)
    if ranks:
        agree = sum(r["agree"] for r in ranks)
        lines += ["", f"ranking agreement: {agree}/{len(ranks)} scenarios ({agree / len(ranks):.0%})"]
        lines += [f"  {_mark(r)} {r['scenario']:<48} predicted best {r['predicted_best']:<14} measured best "
                  f"{r['measured_best']}" for r in ranks]
    lines += series_lines(suite_series(rows))
    lines += kernel_lines(rows)
    settings = setting_ranking(rows)
    if settings:
        lines += ["", f"best setting (samples per second) agreement: {sum(r['agree'] for r in settings)}/"
                      f"{len(settings)} models"]
        lines += [f"  {_mark(r)} {r['model']} {r['strategy']}: predicted best {r['predicted_best']}, measured best "
                  f"{r['measured_best']}" for r in settings]
    return "\n".join(lines)


def _mark(r: dict) -> str:
    return "ok  " if r["agree"] else "MISS"


def scatter(rows, path: str) -> None:
    """Predicted vs measured iteration time, one colour per strategy, log-log with the y = x line."""
    groups = defaultdict(list)
    for r in _predicted(rows):
        groups[r["label"]].append((r["measured_time_s"], r["predicted_time_s"]))
    overall = overall_accuracy(rows)
    predicted_vs_measured(groups, path, xlabel="measured iteration time (s)", ylabel="predicted iteration time (s)",
                          title="predictor validate" + (f": mean accuracy {overall:.1%}" if overall is not None else ""))
