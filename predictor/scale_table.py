"""A scaling sweep (predictor.scaling) as text: the table's header and rows as plain strings (the terminal's rich
table and the HTML report draw the same cells) and the findings, one sentence each: where each line's efficiency
drops below the threshold, where the fastest strategy changes, and the short answer."""
from __future__ import annotations

from typing import Optional

from predictor.report import interval_pct, rate_text, time_text
from predictor.scaling import BEST, Sweep, label, plural, train_cost


def _money(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.3g} d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return time_text(seconds)


def table(result: Sweep, dataset_size: Optional[int] = None, epochs: float = 1.0,
          gpu_hour_cost: Optional[float] = None) -> tuple[list[str], list[list[str]]]:
    """(header, rows): per device count, one row per line: devices, line, plan, iteration, interval, samples/s,
    efficiency, step efficiency, memory per device, bottleneck (batch per device under strong scaling; time to train, device-hours
    and cost with a dataset size)."""
    header = ["GPUs"] + ([] if result.weak else ["batch/GPU"]) + [
        "line", "plan", "iteration", "\u00b1", "samples/s", "eff.", "step", "mem GB", "bottleneck"]
    if dataset_size:
        header += ["train", "GPU-h"] + (["cost"] if gpu_hour_cost is not None else [])
    rows = []
    for k, p in enumerate(result.devices):
        for name, points in result.lines.items():
            pt = points[k]
            pred = pt.prediction
            row = [str(p)] + ([] if result.weak else [f"{pt.batch / p:.4g}"]) + [name]
            if pred is None or not pred.feasible:
                why = (pt.reason or (pred.reason if pred is not None else "")).removeprefix("infeasible: ")
                why = why.split(" (")[0]
                row += ["-", "-", "", "", "", "", "", why[:40] + ("..." if len(why) > 40 else "")]
            else:
                plan = pred.plan.describe() if name != BEST else f"{pred.plan.strategy} {pred.plan.describe()}"
                row += [plan, time_text(pred.iteration_s), interval_pct(pred), rate_text(pred.throughput_samples_per_s),
                        f"{pt.efficiency:.0%}" if pt.efficiency is not None else "-",
                        f"{pt.step_efficiency:.0%}" if pt.step_efficiency is not None else "",
                        f"{pred.memory_bytes / 1e9:.2f}", pred.bottleneck if pred.fits else "does not fit (OOM)"]
            if dataset_size:
                cost = train_cost(pt, dataset_size, epochs, gpu_hour_cost)
                row += ([_duration(cost["train_s"]), f"{cost['gpu_hours']:.4g}"]
                        + ([_money(cost["cost"])] if "cost" in cost else []) if cost
                        else [""] * (2 + (gpu_hour_cost is not None)))
            rows.append(row)
    return header, rows


def findings(result: Sweep) -> list[str]:
    """The efficiency threshold per line, the crossovers and the answer, one sentence each."""
    out = []
    if result.baseline_devices is None:
        return ["no plan of any line fits in memory at any swept count: nothing to scale from"]
    out.append(f"efficiency = samples/s per GPU / {result.baseline_samples_per_device_s:.4g} (the best at "
               f"{plural(result.baseline_devices)}); threshold "
               f"{result.threshold:.0%}")
    for name in result.lines:
        first, step = result.below_threshold.get(name), result.step_below_threshold.get(name)
        last = result.last_efficient(name)
        if first is not None and (step is None or first <= step):
            eff = next(pt.efficiency for pt in result.lines[name] if pt.devices == first)
            out.append(f"{name}: efficiency drops below {result.threshold:.0%} at {plural(first)} ({eff:.0%})"
                       + (f"; {plural(last)} is the largest count before it" if last is not None else ""))
        elif step is not None:
            pt = next(pt for pt in result.lines[name] if pt.devices == step)
            out.append(f"{name}: adding devices stops paying at {plural(step)}: the step there gains "
                       f"{pt.step_efficiency:.0%} of linear (below {result.threshold:.0%})"
                       + (f"; {plural(last)} is the largest count before it" if last is not None else ""))
        elif last is not None:
            out.append(f"{name}: efficiency stays at or above {result.threshold:.0%} at every count it can run, "
                       f"up to {plural(last)}")
        else:
            out.append(f"{name}: no usable point (infeasible or out of memory at every count)")
    above = [(pt.efficiency, name, pt) for name, points in result.lines.items() for pt in points
             if pt.efficiency is not None and pt.efficiency > 1.05]
    if above:
        base = max((pt for points in result.lines.values() for pt in points
                    if pt.devices == result.baseline_devices and pt.usable), key=lambda pt: pt.samples_per_s)
        eff, name, pt = max(above, key=lambda item: item[0])
        out.append(f"superlinear: {name} reaches {eff:.0%} at {plural(pt.devices)}; the baseline at "
                   f"{plural(result.baseline_devices)} ({label(base.prediction)}) is held back by "
                   f"{base.prediction.bottleneck}, which more devices remove")
    for c in result.crossovers:
        what = "best strategy changes" if c.line == BEST else "fastest named strategy changes"
        out.append(f"crossover: {what} between {c.after_devices} and {plural(c.at_devices)}: {c.before} -> "
                   f"{c.after}")
    if not result.crossovers:
        lines = [n for n in result.lines if n != BEST]
        if BEST in result.lines:
            names = sorted({pt.prediction.plan.strategy for pt in result.lines[BEST] if pt.usable})
            out.append(f"no crossover: the best plan is {', '.join(names) or 'none'} at every count where one fits")
        elif len(lines) > 1:
            out.append("no crossover: the fastest named strategy is the same at every count where one fits")
    answer = _answer(result)
    if answer:
        out.append(answer)
    return out


def _answer(result: Sweep) -> str:
    """The largest count that still scales efficiently on the line that leads (best if swept), and its plan."""
    name = BEST if BEST in result.lines else next(iter(result.lines))
    last = result.last_efficient(name)
    if last is None:
        return ""
    pt = next(pt for pt in result.lines[name] if pt.devices == last)
    return (f"answer: up to {plural(last)} scale (efficiency and each step >= {result.threshold:.0%}) with "
            f"{label(pt.prediction)}: "
            f"{rate_text(pt.samples_per_s)} samples/s, {time_text(pt.prediction.iteration_s)} per iteration, "
            f"{pt.prediction.memory_bytes / 1e9:.2f} GB per device")
