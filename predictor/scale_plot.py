"""Figures of a scaling sweep (predictor.scaling), drawn with matplotlib's Agg backend: `scaling_figure`
(throughput and scaling efficiency against the device count, one line per strategy with its interval as a band,
points that do not fit as crosses, the threshold dashed, each crossover a dotted line labelled with the new winner)
and `breakdown_figure` (the best line's iteration time and memory per device as stacked bars per count).

`save_scaling_plot` writes the first to a .png or .svg (profiler.outputs.save_figure: atomic); `png_bytes` gives
any figure as PNG bytes (for the HTML report's data URIs). Figures are made without pyplot (Agg canvases), so
nothing global is left open and the command starts faster. docs/planning.md.
"""
from __future__ import annotations

import io
import math

from predictor.report import time_text
from predictor.scaling import BEST, Sweep
from profiler.outputs import save_figure

#: the time terms of a Prediction drawn in the breakdown, bottom to top (exposed communication per kind after)
TIME_TERMS = (("forward", "compute_fwd_s"), ("backward", "compute_bwd_s"), ("update", "update_s"),
              ("bubble", "bubble_s"), ("swap", "swap_s"), ("recompute", "recompute_s"), ("input", "input_s"))
MEMORY_TERMS = ("weights", "grads", "optimizer", "activations", "comm_buffers", "workspace")


def _figure(**options):
    """A matplotlib Figure drawn by Agg, without pyplot (no global figure state; a faster import)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**options)
    FigureCanvasAgg(fig)
    return fig


def _colours() -> list:
    import matplotlib

    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def _log2_axis(ax, devices) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(devices))
    ax.set_xticklabels([str(d) for d in devices], fontsize=8)
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)


def scaling_figure(result: Sweep, title: str = ""):
    """The two-panel figure (module docstring)."""
    fig = _figure(figsize=(8, 7.5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    colours = _colours()
    for k, (name, points) in enumerate(result.lines.items()):
        colour = colours[k % len(colours)]
        usable = [pt for pt in points if pt.usable]
        xs = [pt.devices for pt in usable]
        ys = [pt.samples_per_s for pt in usable]
        style = dict(color=colour, lw=2.2 if name == BEST else 1.5, marker="o", ms=4)
        top.plot(xs, ys, label=name, **style)
        bands = [(pt.devices, pt.samples_per_s_interval()) for pt in usable]
        bands = [(d, iv) for d, iv in bands if iv is not None]
        if bands:
            top.fill_between([d for d, _ in bands], [iv[0] for _, iv in bands], [iv[1] for _, iv in bands],
                             color=colour, alpha=0.18, lw=0)
        bands = [(pt.devices, pt.efficiency_interval) for pt in usable if pt.efficiency_interval is not None]
        if bands:
            bottom.fill_between([d for d, _ in bands], [iv[0] for _, iv in bands], [iv[1] for _, iv in bands],
                                color=colour, alpha=0.18, lw=0)
        bottom.plot(xs, [pt.efficiency for pt in usable], label=name, **style)
        oom = [pt for pt in points if pt.prediction is not None and pt.prediction.feasible and not pt.prediction.fits]
        if oom:
            top.scatter([pt.devices for pt in oom], [pt.samples_per_s for pt in oom], marker="x", color=colour,
                        s=36, label=f"{name}: does not fit")
        first_below = result.below_threshold.get(name)
        if first_below is not None:
            at = next(pt for pt in usable if pt.devices == first_below)
            bottom.annotate(f"{name} < {result.threshold:.0%}", (at.devices, at.efficiency), fontsize=8,
                            color=colour, xytext=(4, -12), textcoords="offset points")
    bottom.axhline(result.threshold, color="grey", ls="--", lw=1)
    bottom.text(result.devices[0], result.threshold, f" threshold {result.threshold:.0%}", fontsize=8,
                color="grey", va="bottom")
    at: dict[float, list[str]] = {}
    for c in result.crossovers:  # one dotted line per position, labelled with every new winner there
        at.setdefault(math.sqrt(c.after_devices * c.at_devices), []).append(
            ("best: " if c.line == BEST else "") + c.after)
    for x, names in at.items():
        for ax in (top, bottom):
            ax.axvline(x, color="black", ls=":", lw=1)
        top.annotate("-> " + "\n-> ".join(dict.fromkeys(names)), (x, 0.02), xycoords=("data", "axes fraction"),
                     rotation=90, fontsize=7, va="bottom", ha="right")
    top.set_yscale("log")
    top.set_ylabel("samples/s (band: interval)")
    bottom.set_ylabel("scaling efficiency")
    bottom.set_xlabel("devices")
    for ax in (top, bottom):
        _log2_axis(ax, result.devices)
    top.legend(fontsize=8, loc="upper left")
    scaling = (f"weak scaling, {result.batch_per_device} samples per device" if result.weak
               else f"strong scaling, global batch {result.global_batch}")
    top.set_title(title or f"{result.model}: {scaling}", fontsize=10)
    fig.tight_layout()
    return fig


def breakdown_figure(result: Sweep, line: str = BEST):
    """Stacked bars of `line`'s iteration time and memory per device at each count it has a usable plan."""
    points = [pt for pt in result.lines[line] if pt.usable]
    fig = _figure(figsize=(11, 4.2))
    left, right = fig.subplots(1, 2)
    labels = [str(pt.devices) for pt in points]
    x = range(len(points))
    totals = [pt.prediction.iteration_s for pt in points]
    terms = [(name, [getattr(pt.prediction, attr) for pt in points]) for name, attr in TIME_TERMS]
    kinds = sorted({k for pt in points for k, v in pt.prediction.comm_exposed_s.items() if v > 0})
    terms += [(f"exposed {k}", [pt.prediction.comm_exposed_s.get(k, 0.0) for pt in points]) for k in kinds]
    bottom = [0.0] * len(points)
    for name, values in terms:  # shares of the iteration: the terms of a 10 s and a 10 ms step side by side
        shares = [100 * v / t if t > 0 else 0.0 for v, t in zip(values, totals)]
        if any(v > 0 for v in shares):
            left.bar(x, shares, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, shares)]
    for k, total in enumerate(totals):
        left.text(k, 101, time_text(total), ha="center", va="bottom", fontsize=7, rotation=90)
    left.set_ylim(0, 125)
    left.set_ylabel("% of the iteration (its time above the bar)")
    left.set_title(f"{line}: iteration time by term", fontsize=10)
    bottom = [0.0] * len(points)
    for name in MEMORY_TERMS:
        values = [getattr(pt.prediction, f"{name}_bytes") / 1e9 for pt in points]
        if any(v > 0 for v in values):
            right.bar(x, values, bottom=bottom, label=name.replace("_", " "))
            bottom = [b + v for b, v in zip(bottom, values)]
    capacity = [pt.prediction.device_memory_bytes / 1e9 for pt in points]
    if capacity and all(math.isfinite(c) for c in capacity):
        right.plot(list(x), capacity, color="black", ls="--", lw=1, label="device memory")
    right.set_ylabel("GB per device")
    right.set_title(f"{line}: memory per device by term", fontsize=10)
    for ax in (left, right):
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel("devices")
        ax.legend(fontsize=7, loc="lower left" if ax is left else "best")
    fig.tight_layout()
    return fig


def save_scaling_plot(result: Sweep, path: str, title: str = "") -> None:
    save_figure(scaling_figure(result, title), path, dpi=110)


def png_bytes(fig, dpi: int = 100) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
